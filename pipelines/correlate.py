"""Root-cause correlation: rank the infrastructure events around each anomaly and outage.

Which event types can explain which kind of finding, how strongly, and why, is data
(CAUSE_RULES). An event is a candidate when it happened (on corrected time) from
`before_ms` before a finding began until `after_ms` after it ended, and concerns the
finding's topic: the same topic, the topic's namespace (bundle events), or the whole
cluster (events naming neither a topic nor a bundle, e.g. a bookie lost).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.clock_skew import UNCORRECTED
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import CAUSE

MAX_CAUSES = 5
# The fields a candidate cause is ordered by, in the order of its struct: strongest rank,
# nearest in time, then stable tie-breakers.
CAUSE_ORDER = ("rank", "distance_ms", "event_type", "ts", "host", "reason")
# Acked messages go missing after their ack (their copies die, their reads fail), until they
# are read: for lost and unseen messages, events up to this long after the last ack count.
MISSING_AFTER_MS = 180_000
# A cause this close to a finding, on a host whose clock is not aligned, may be out of order.
UNCERTAIN_WITHIN_MS = 1000

_UNLOAD = (
    "unloading the topic's bundle disconnects its producers and consumers; clients "
    "reconnect with exponential backoff (100, 200, 400 ms ...)"
)
_OWNER = "a broker (re)acquired the bundle and loaded its topics: clients wait until it is ready"
_DISCONNECT = "the broker closed the producer's connection; the client retries with backoff"
_RECONNECT = "the client scheduled a reconnection after losing its broker"
_BROKER_DOWN = "the broker went down: its topics are unavailable until another broker owns them"
_ZK = "the broker lost its metadata session; bundle ownership and ledgers are re-established"
_WRITE = "bookie writes failed: the broker cannot persist entries until the ledger is replaced"
_RETRY = (
    "an ack was lost in the failover, so the producer resent messages that were "
    "already stored, and without deduplication they were written again"
)
_REPLACED = "a bookie was replaced in the ledger's ensemble: writes pause until the new one is in"
_BOOKIE_GONE = "a bookie holding the entries went away; with all Qw copies gone the data is lost"
_UNDER = "the ledger lost replicas and is under-replicated: reads can stall or fail"
_UNREADABLE = (
    "reads of the fragment holding these entries failed: every bookie with a copy is down, so "
    "reads block until one returns"
)
_SKIPPED = (
    "the broker found the ledger holding these entries lost (no bookie has a copy) and, as "
    "autoSkipNonRecoverableData allows, acknowledged it in the subscription unread"
)
_CURSOR = (
    "a broker that loaded the topic recovered the subscription's cursor to this position: "
    "every entry up to it counts as consumed, delivered or not"
)
_UNREADABLE_SKIPPED = (
    "reads of the fragment holding these entries failed; a broker that skips unreadable data "
    "(autoSkipNonRecoverableData) moves its consumers past them"
)
_TRANSFER = (
    "the bundle was transferred to another broker (PIP-192): its topics closed on the old owner "
    "and the clients were sent to the new one, which had to load them first"
)
_LOCK_LOST = (
    "the broker lost its ZooKeeper session (cut off from ZooKeeper past the session timeout); "
    "reconnecting, it found its bundle lock gone and unloaded the bundle, disconnecting clients"
)
_ZK_RESEND = (
    "the broker lost its ZooKeeper session: it shut down, or gave up the bundle when it found "
    "its lock gone, before acknowledging writes it had stored; the producer sent them again "
    "to the next owner"
)

# kind of finding → event_type → (rank: 1 strongest, why it explains the finding; 0 for the
# events that only a fault produces and that name it, ahead of the consequences they cause)
CAUSE_RULES: dict[str, dict[str, tuple[int, str]]] = {
    "outage": {
        "bundle_lock_lost": (0, _LOCK_LOST),
        "bundle_transfer_started": (0, _TRANSFER),
        "bundle_transferred": (2, _TRANSFER),
        "bundle_unload_requested": (1, _UNLOAD),
        "bundle_unload_started": (1, _UNLOAD),
        "bundle_shedding": (1, _UNLOAD),
        "topic_unloading": (2, _UNLOAD),
        "producer_disconnected": (2, _DISCONNECT),
        "client_reconnect_scheduled": (3, _RECONNECT),
        "broker_shutdown": (1, _BROKER_DOWN),
        "zk_session_lost": (1, _ZK),
        "bundle_ownership_released": (2, _OWNER),
        "bundle_ownership_acquired": (3, _OWNER),
        "bundle_unload_finished": (3, _UNLOAD),
        "topic_closed": (2, "the topic was closed on its broker"),
        "topic_fenced": (2, "the topic was fenced after a write failure"),
        "bookie_write_error": (2, _WRITE),
        "new_ensemble": (2, _REPLACED),
        "bookie_replaced": (2, _REPLACED),
        "bookie_lost": (2, _BOOKIE_GONE),
    },
    "duplicated": {
        "bundle_lock_lost": (0, _LOCK_LOST),
        "zk_session_lost": (0, _ZK_RESEND),
        "bundle_transfer_started": (1, _RETRY),
        "client_invalid_producer_receipt": (1, _RETRY),
        "bundle_unload_requested": (1, _RETRY),
        "bundle_unload_started": (1, _RETRY),
        "topic_unloading": (1, _RETRY),
        "producer_disconnected": (1, _RETRY),
        "bookie_write_error": (2, _RETRY),
        "bundle_ownership_acquired": (2, _OWNER),
        "ledger_recovery": (2, "the ledger was recovered and fenced; unacked writes were retried"),
        "broker_shutdown": (2, _BROKER_DOWN),
        "ledger_created": (3, "a new ledger was opened after the old one was closed"),
    },
    "lost": {
        "ledger_skipped_lost": (0, _SKIPPED),
        "cursor_recovered": (1, _CURSOR),
        "ledger_read_failed": (1, _UNREADABLE),
        "bookie_lost": (1, _BOOKIE_GONE),
        "bookie_unreachable": (2, _BOOKIE_GONE),
        "ledger_under_replicated": (1, _UNDER),
        "new_ensemble": (2, "the ensemble changed while the entries were being written"),
        "bookie_replaced": (2, "a bookie was replaced while the entries were being written"),
        "bookie_read_only": (2, "a bookie turned read-only"),
        "ledger_recovery": (2, "ledger recovery decided the last entry; later writes were cut"),
        "broker_shutdown": (2, _BROKER_DOWN),
    },
    "unseen": {
        "ledger_under_replicated": (1, _UNDER),
        "bookie_lost": (1, _BOOKIE_GONE),
        "ledger_read_failed": (1, _UNREADABLE),
        "bookie_unreachable": (2, _BOOKIE_GONE),
        "bookie_read_only": (2, "a bookie turned read-only"),
    },
    "out_of_order": {
        "bundle_unload_started": (1, _UNLOAD),
        "producer_disconnected": (1, _DISCONNECT),
        "bundle_ownership_acquired": (2, _OWNER),
    },
    "poll_skip": {
        "ledger_skipped_lost": (0, _SKIPPED),
        "ledger_read_failed": (1, _UNREADABLE_SKIPPED),
        "bookie_lost": (2, _BOOKIE_GONE),
        "ledger_under_replicated": (2, _UNDER),
    },
    "redelivered": {
        "bundle_unload_started": (1, _UNLOAD),
        "topic_unloading": (1, _UNLOAD),
        "consumer_closed": (1, "the consumer was closed; unacked messages are redelivered"),
    },
}


def cause_rules(spark) -> DataFrame:  # noqa: ANN001 - SparkSession
    """CAUSE_RULES as a small DataFrame (kind, event_type, rank, why)."""
    rows = [(k, e, r, w) for k, rules in CAUSE_RULES.items() for e, (r, w) in rules.items()]
    return local_frame(spark, rows, "kind string, event_type string, rank int, why string")


def topic_namespace(topic: Column) -> Column:
    """persistent://tenant/ns/topic → tenant/ns."""
    return F.nullif(F.regexp_extract(topic, r"^[a-z-]+://([^/]+/[^/]+)/", 1), F.lit(""))


def bundle_namespace(bundle: Column) -> Column:
    """tenant/ns/0x00000000_0x40000000 → tenant/ns."""
    return F.nullif(F.regexp_extract(bundle, r"^([^/]+/[^/]+)/", 1), F.lit(""))


def _event_scope(events: DataFrame) -> DataFrame:
    return events.select(
        "event_type",
        F.col("corrected_ts").alias("event_ts"),
        "host",
        F.col("topic").alias("event_topic"),
        F.coalesce(topic_namespace(F.col("topic")), bundle_namespace(F.col("bundle"))).alias(
            "namespace"
        ),
        F.when(
            F.col("event_type") == "cursor_recovered",
            F.format_string(
                "%s, cursor %s at %d:%s",
                "topic",
                F.get_json_object("detail", "$.cursor"),
                "ledger_id",
                F.get_json_object("detail", "$.entry_id"),
            ),
        )
        .otherwise(F.coalesce("bundle", "topic", "bookie", F.col("ledger_id").cast("string")))
        .alias("what"),
        "clock",
    )


def _same_topic(findings_topic: Column, partition: Column, event_topic: Column) -> Column:
    partitioned = F.concat(findings_topic, F.lit("-partition-"), partition.cast("string"))
    return event_topic.isNull() | (event_topic == findings_topic) | (event_topic == partitioned)


def rank_causes(
    findings: DataFrame, events: DataFrame, rules: DataFrame, before_ms: int, after_ms: int
) -> DataFrame:
    """(finding_id, causes) for findings (finding_id, kind, topic, partition, start, end).

    Events join on the topic's namespace, cluster-wide events (no namespace) on time alone.
    """
    scoped = _event_scope(events).join(F.broadcast(rules), on="event_type", how="inner")
    event_us = F.unix_micros("event_ts")
    missing = F.col("f.kind").isin("lost", "unseen")
    after_us = F.when(missing, F.lit(max(after_ms, MISSING_AFTER_MS) * 1000)).otherwise(
        F.lit(after_ms * 1000)
    )
    window = (event_us >= F.unix_micros("start") - F.lit(before_ms * 1000)) & (
        event_us <= F.unix_micros("end") + after_us
    )
    f = findings.withColumn("namespace", topic_namespace(F.col("topic"))).alias("f")
    by_namespace = f.join(
        scoped.filter(F.col("namespace").isNotNull()).alias("e"),
        on=(F.col("f.namespace") == F.col("e.namespace")) & (F.col("f.kind") == F.col("e.kind")),
        how="inner",
    ).filter(window & _same_topic(F.col("topic"), F.col("partition"), F.col("event_topic")))
    cluster_wide = f.join(
        F.broadcast(scoped.filter(F.col("namespace").isNull()).alias("e")),
        on=F.col("f.kind") == F.col("e.kind"),
        how="inner",
    ).filter(window)
    columns = [
        "f.finding_id",
        "f.start",
        "rank",
        "why",
        "event_type",
        "event_ts",
        "host",
        "what",
        "clock",
    ]
    candidates = by_namespace.select(*columns).unionByName(cluster_wide.select(*columns))
    return _top_causes(candidates)


def _top_causes(candidates: DataFrame) -> DataFrame:
    offset_ms = (F.unix_micros("event_ts") - F.unix_micros("start")) / F.lit(1000.0)
    relation = F.when(
        offset_ms < 0, F.format_string("%.0f ms before it began", -offset_ms)
    ).otherwise(F.format_string("%.0f ms after it began", offset_ms))
    uncertain = F.when(
        (F.col("clock") == UNCORRECTED) & (F.abs(offset_ms) < UNCERTAIN_WITHIN_MS),
        F.format_string(
            " (the clock of %s could not be aligned with the clients', so this timing is "
            "uncertain)",
            F.col("host"),
        ),
    ).otherwise(F.lit(""))
    reason = F.format_string(
        "%s (%s on %s, %s): %s%s",
        F.col("event_type"),
        F.coalesce("what", F.lit("cluster")),
        F.coalesce("host", F.lit("?")),
        relation,
        F.col("why"),
        uncertain,
    )
    ranked = candidates.select(
        "finding_id",
        F.struct(
            F.col("rank").alias("rank"),
            F.abs(offset_ms).alias("distance_ms"),
            F.col("event_type").alias("event_type"),
            F.col("event_ts").alias("ts"),
            F.col("host").alias("host"),
            reason.alias("reason"),
        ).alias("c"),
    )
    # The best MAX_CAUSES per finding, chosen by a window sort (it spills) before collecting:
    # a long finding can hold a million candidate events (a real broker logs a failed add per
    # pending message) — a collect_list of them all ran out of memory. The order is the
    # struct's own, so the pick is the one array_sort over all of them gave.
    # A fact logged twice (a broker writes its ZooKeeper session loss from two loggers in the
    # same millisecond) is one cause: identical candidates sort side by side, the repeats go.
    order = W.partitionBy("finding_id").orderBy(*[F.col(f"c.{name}") for name in CAUSE_ORDER])
    repeat = F.coalesce(F.col("c") == F.lag("c").over(order), F.lit(False))
    ranked = ranked.withColumn("_repeat", repeat).filter(~F.col("_repeat"))
    ranked = ranked.withColumn("_n", F.row_number().over(order)).filter(F.col("_n") <= MAX_CAUSES)
    best = F.array_sort(F.collect_list("c"))
    as_cause = F.transform(
        best,
        lambda c: F.struct(
            c["event_type"].alias("event_type"),
            c["ts"].alias("ts"),
            c["host"].alias("host"),
            c["reason"].alias("reason"),
        ),
    )
    return ranked.groupBy("finding_id").agg(
        as_cause.cast(T.ArrayType(CAUSE, False)).alias("causes")
    )


def with_causes(findings: DataFrame, causes: DataFrame, id_column: str) -> DataFrame:
    """Replace `causes` of `findings` (keyed by `id_column`) with the ranked ones (or [])."""
    ranked = causes.withColumnRenamed("finding_id", id_column).withColumnRenamed(
        "causes", "_ranked"
    )
    empty = F.array().cast(T.ArrayType(CAUSE, False))
    return (
        findings.join(ranked, on=id_column, how="left")
        .withColumn("causes", F.coalesce("_ranked", empty))
        .drop("_ranked")
        .select(*findings.columns)
    )


def findings_of(anomalies: DataFrame, outages: DataFrame) -> DataFrame:
    """Anomalies and outages as findings (finding_id, kind, topic, partition, start, end)."""
    return (
        anomalies.filter(F.col("first_ts").isNotNull())
        .select(
            F.col("anomaly_id").alias("finding_id"),
            "kind",
            "topic",
            "partition",
            F.col("first_ts").alias("start"),
            F.coalesce("last_ts", "first_ts").alias("end"),
        )
        .unionByName(
            outages.select(
                F.col("outage_id").alias("finding_id"),
                F.lit("outage").alias("kind"),
                "topic",
                "partition",
                "start",
                "end",
            )
        )
    )
