"""ZooKeeper changes (bronze.zk_changes) → infra events: ownership, bookies, ledgers, brokers.

A path's kind and the op decide the event; ledger metadata changes are classified by the
decoded state and ensemble count against the previous observation of the same znode.
Snapshot rows (a saved dump) carry state, not happenings, so they give no events.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.schemas import INFRA_EVENTS, conform

BUNDLE_PATH = r"^/namespace/(.+/0x[0-9a-f]{8}_0x[0-9a-f]{8})$"
READONLY_BOOKIE_PATH = r"^/ledgers/available/readonly/([^/]+)$"
BOOKIE_PATH = r"^/ledgers/available/([^/]+)$"
UNDER_REPLICATED_PATH = r"^/ledgers/underreplication/ledgers/(?:[0-9a-f]{4}/){4}urL(\d+)$"
LEDGER_PATH = r"^/ledgers/(?:\d+/)+L\d+$"
BROKER_PATH = r"^/loadbalance/brokers/([^/]+)$"
POLICIES_PATH = r"^/admin/policies/[^/]+/[^/]+$"


def _ledger_id_from_path(path: Column) -> Column:
    """/ledgers/00/0000/L0002 → 2: the hierarchical parts are the zero-padded id's digits."""
    digits = F.regexp_replace(F.regexp_replace(path, r"^/ledgers/", ""), r"[^0-9]", "")
    return digits.try_cast("long")  # an id too long for a long is no ledger id


def with_ledger_state(changes: DataFrame) -> DataFrame:
    """Add state, segments and previous_* (the same znode's prior observation) for ledgers."""
    previous = (
        W.partitionBy("zookeeper", "path")
        .orderBy("ts", "source_file", "line_number")
        .rowsBetween(-1, -1)
    )
    state = F.get_json_object("decoded", "$.state")
    segments = F.get_json_object("decoded", "$.segment_count").cast("int")
    return changes.withColumns({"state": state, "segments": segments}).withColumns(
        {
            "previous_state": F.first("state").over(previous),
            "previous_segments": F.first("segments").over(previous),
        }
    )


def _event_type() -> Column:
    op, path = F.col("op"), F.col("path")
    created, changed, deleted = op == "create", op == "change", op == "delete"
    is_ledger = path.rlike(LEDGER_PATH)
    state_changed = ~F.col("state").eqNullSafe(F.col("previous_state"))
    return (
        F.when(op == "resync", "zk_capture_resync")
        .when(path.rlike(BUNDLE_PATH) & created, "bundle_ownership_acquired")
        .when(path.rlike(BUNDLE_PATH) & deleted, "bundle_ownership_released")
        .when(path.rlike(READONLY_BOOKIE_PATH) & created, "bookie_read_only")
        .when(path.rlike(READONLY_BOOKIE_PATH) & deleted, "bookie_read_only_ended")
        .when(path.rlike(BOOKIE_PATH) & created & ~path.endswith("/readonly"), "bookie_registered")
        .when(path.rlike(BOOKIE_PATH) & deleted & ~path.endswith("/readonly"), "bookie_lost")
        .when(path.rlike(UNDER_REPLICATED_PATH) & created, "ledger_under_replicated")
        .when(path.rlike(UNDER_REPLICATED_PATH) & deleted, "ledger_re_replicated")
        .when(path.rlike(BROKER_PATH) & created, "broker_registered")
        .when(path.rlike(BROKER_PATH) & deleted, "broker_lost")
        .when(is_ledger & created, "ledger_created")
        .when(is_ledger & deleted, "ledger_deleted")
        .when(
            is_ledger & changed & state_changed & (F.col("state") == "IN_RECOVERY"),
            "ledger_recovery",
        )
        .when(is_ledger & changed & state_changed & (F.col("state") == "CLOSED"), "ledger_closed")
        .when(
            is_ledger & changed & (F.col("segments") > F.coalesce("previous_segments", F.lit(1))),
            "new_ensemble",
        )
        .when(path.rlike(POLICIES_PATH) & (created | changed), "namespace_policies_changed")
    )


def zk_change_events(changes: DataFrame) -> DataFrame:
    """bronze.zk_changes rows → INFRA_EVENTS rows (source 'zookeeper', host = the ensemble)."""
    path = F.col("path")
    ledger_id = (
        F.when(path.rlike(UNDER_REPLICATED_PATH), F.regexp_extract(path, UNDER_REPLICATED_PATH, 1))
        .when(path.rlike(LEDGER_PATH), _ledger_id_from_path(path))
        .try_cast("long")
    )
    bookie = (
        F.when(path.rlike(READONLY_BOOKIE_PATH), F.regexp_extract(path, READONLY_BOOKIE_PATH, 1))
        .when(path.rlike(BOOKIE_PATH), F.regexp_extract(path, BOOKIE_PATH, 1))
        .when(path.rlike(LEDGER_PATH), F.get_json_object("decoded", "$.ensemble"))
        .when(path.rlike(UNDER_REPLICATED_PATH), F.get_json_object("decoded", "$.replica"))
    )
    detail = F.to_json(
        F.struct(
            path.alias("path"),
            F.col("op").alias("op"),
            F.col("version").alias("version"),
            F.col("state").alias("state"),
            F.get_json_object("decoded", "$.persistence").alias("persistence"),
        )
    )
    events = (
        changes.filter(F.col("op") != "snapshot")
        .transform(with_ledger_state)
        .withColumn("event_type", _event_type())
        .filter(F.col("event_type").isNotNull())
    )
    rows = events.select(
        F.sha2(F.concat_ws("|", "source_file", "line_number", "event_type"), 256).alias("event_id"),
        "ts",
        F.col("ts").alias("corrected_ts"),
        F.lit("uncorrected").alias("clock"),
        F.col("zookeeper").alias("host"),
        F.lit("zookeeper").alias("source"),
        "event_type",
        F.lit(None).cast("string").alias("topic"),
        F.when(path.rlike(BUNDLE_PATH), F.regexp_extract(path, BUNDLE_PATH, 1)).alias("bundle"),
        ledger_id.alias("ledger_id"),
        bookie.alias("bookie"),
        detail.alias("detail"),
        F.coalesce("decoded", "data").alias("raw"),
        "source_file",
        "line_number",
    )
    return conform(rows, INFRA_EVENTS)
