"""gold.run_features: one row per analyzed run — its settings and faults (features) and what
went wrong (labels) — computed in Spark from bronze.run_events, silver and gold.

Nothing here reads a simulator's truth.json: a simulated run is known only by what `analyze`
took in (its trace, logs and ZooKeeper capture), exactly like a real one. Only the per-run
aggregates leave Spark (one row per run).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.schemas import RUN_FEATURES, conform

# Chaos actions (trace `chaos` events; a `:N` suffix is dropped) → the fault kind a model sees.
FAULT_KINDS = {
    "unload": "unload",
    "transfer": "transfer",
    "kill-broker": "kill-broker",
    "isolate-broker": "isolate-broker",
    "isolate-broker-from-zk": "isolate-broker",
    "kill-bookie": "kill-bookie",
    "stop-bookie": "kill-bookie",
    "kill-bookies": "kill-bookie",
    "kill-qw-bookies": "kill-bookie",
    # a bookie killed and restarted with its journal and ledgers deleted: down, then back empty
    "wipe-bookie-disk": "kill-bookie",
    "wipe-qw-bookies-disk": "kill-bookie",
    "wipe-qw-bookies-disk-in-turn": "kill-bookie",
    "isolate-bookie": "isolate-bookie",
    "isolate-bookie-from-zk": "isolate-bookie",
    "partition-broker-from-bookies": "partition-broker-from-bookies",
    "lossy-broker-bookies": "lossy-broker-bookies",
}
NO_FAULT, OTHER_FAULT = "none", "other"
# Actions whose bookies come back without their copies: their data did not survive.
DISK_WIPES = ("wipe-bookie-disk", "wipe-qw-bookies-disk", "wipe-qw-bookies-disk-in-turn")
# Kinds whose targets are bookies taken down (their copies unreachable until they return).
BOOKIES_DOWN = ("kill-bookie",)
# Kinds that only move a bundle to a broker (no process, no link down).
BUNDLE_MOVES = ("unload", "transfer")
# Kinds whose targets are brokers that stop serving (unload and transfer move a bundle only).
BROKERS_DOWN = ("kill-broker", "isolate-broker")
# Causes (infrastructure event types) that say a finding came from copies out of reach.
STORAGE_CAUSES = (
    "bookie_lost",
    "ledger_under_replicated",
    "new_ensemble",
    "bookie_replaced",
    "bookie_write_error",
    "bookie_read_only",
)
UNREADABLE_KINDS = ("unseen", "lost", "poll_skip")
OUTAGE_LABEL_MS = 1000.0


def action_name(action: Column) -> Column:
    """A chaos action without its `:N` suffix ('kill-bookies:2' → 'kill-bookies')."""
    return F.regexp_replace(F.lower(action), r":\d+$", "")


def fault_kind(action: Column) -> Column:
    """A chaos action ('kill-bookies:2', 'isolate-broker-from-zk') → its fault kind."""
    name = action_name(action)
    mapped = F.lit(None).cast("string")
    for raw, kind in FAULT_KINDS.items():
        mapped = F.when(name == raw, F.lit(kind)).otherwise(mapped)
    return F.coalesce(mapped, F.lit(OTHER_FAULT))


def run_settings(run_events: DataFrame) -> DataFrame:
    """Per run: the first `config` event's settings and where the run comes from: `simulated`
    (the simulator marks its runs), `synthetic` (a hand-made example) or `real` (a capture)."""
    fields = [
        "scenario",
        "ensemble_size",
        "write_quorum",
        "ack_quorum",
        "bookies",
        "brokers",
        "deduplication",
    ]
    simulated = F.coalesce(F.col("extra")["simulated"] == "true", F.lit(False))
    synthetic = F.coalesce(F.col("scenario") == "synthetic", F.lit(False))
    marks = [simulated.alias("simulated"), synthetic.alias("synthetic")]
    first = F.min(F.struct("ts", "line_number", *fields, *marks)).alias("config")
    return (
        run_events.filter(F.col("event") == "config")
        .groupBy("run_id")
        .agg(first)
        .select(
            "run_id",
            F.when(F.col("config.simulated"), "simulated")
            .when(F.col("config.synthetic"), "synthetic")
            .otherwise("real")
            .alias("source"),
            *[F.col(f"config.{name}").alias(name) for name in fields],
        )
        .withColumn("striping", F.col("ensemble_size") > F.col("write_quorum"))
    )


def run_faults(run_events: DataFrame, run_end: DataFrame) -> DataFrame:
    """Per run with a fault: its kind, bookies and brokers taken down, duration, restarts.

    A fault's `chaos` event may be followed by one with `phase: "end"` (undone: the bookie
    restarted, the link healed); a fault with no end lasts until the run's last producer event.
    A run with several actions is one fault from the first start to the last end, of the kind
    of its first action that takes a process or link down (else of its first), the bookies and
    brokers of all its actions summed.
    run_end: (run_id, last_ts).
    """
    # ingest keeps a string field's text in `extra` without its quotes (`end`); JSON text
    # (`"end"`) is read too
    raw_phase = F.col("extra")["phase"]
    phase = F.coalesce(F.get_json_object(raw_phase, "$"), raw_phase)
    chaos = run_events.filter(F.col("event") == "chaos").withColumns(
        {
            "kind": fault_kind(F.col("action")),
            "is_end": F.coalesce(phase == "end", F.lit(False)),
            "targets": F.size(
                F.array_distinct(F.split(F.coalesce("target", F.lit("")), r"\s*,\s*"))
            ),
        }
    )
    starts = chaos.filter(~F.col("is_end"))
    ends = chaos.filter(F.col("is_end"))
    # several actions in one run (`--chaos` repeated, `chaos run --then`): the run's kind is
    # the first action that takes a process or a link down; an unload or a transfer, which
    # only moves a bundle, only when the run has nothing else
    moves_only = F.col("kind").isin(*BUNDLE_MOVES)
    kind_order = F.min(F.struct(moves_only, "ts", "kind")).getField("kind")
    per_run = starts.groupBy("run_id").agg(
        kind_order.alias("fault_kind"),
        F.sum(F.when(F.col("kind").isin(*BOOKIES_DOWN), F.col("targets")).otherwise(0)).alias(
            "fault_bookies"
        ),
        F.sum(F.when(F.col("kind").isin(*BROKERS_DOWN), F.col("targets")).otherwise(0)).alias(
            "fault_brokers"
        ),
        F.min("ts").alias("fault_start"),
        F.max(action_name(F.col("action")).isin(*DISK_WIPES)).alias("disks_wiped"),
    )
    undone = ends.groupBy("run_id").agg(
        F.max("ts").alias("fault_end"),
        F.max(F.col("kind").isin(*BOOKIES_DOWN).cast("int")).alias("bookies_restarted"),
    )
    finished = F.coalesce(F.col("fault_end"), F.col("last_ts"))
    return (
        per_run.join(undone, ["run_id"], how="left")
        .join(run_end, ["run_id"], how="left")
        .select(
            "run_id",
            "fault_kind",
            F.col("fault_bookies").cast("int").alias("fault_bookies"),
            F.col("fault_brokers").cast("int").alias("fault_brokers"),
            "fault_start",
            F.greatest(
                (F.unix_micros(finished) - F.unix_micros("fault_start")) / F.lit(1e6), F.lit(0.0)
            ).alias("fault_duration_s"),
            F.coalesce(F.col("bookies_restarted") == 1, F.lit(False)).alias("bookies_restarted"),
            "disks_wiped",
        )
    )


def run_traffic(message_history: DataFrame) -> DataFrame:
    """Per run: last producer event, batching, partitions and the most messages in flight.

    In flight: +1 at a send, −1 at its ack or nack, summed in each producer's time order.
    """
    done_ts = F.coalesce("ack_ts", "nack_ts")
    steps = message_history.filter(F.col("send_ts").isNotNull()).select(
        "run_id",
        "topic",
        "partition",
        "producer",
        F.explode(
            F.array(
                F.struct(F.col("send_ts").alias("ts"), F.lit(1).alias("step")),
                F.struct(done_ts.alias("ts"), F.lit(-1).alias("step")),
            )
        ).alias("e"),
    )
    stream = W.partitionBy("run_id", "topic", "partition", "producer").orderBy("e.ts", "e.step")
    running = steps.filter(F.col("e.ts").isNotNull()).withColumn(
        "in_flight", F.sum("e.step").over(stream.rowsBetween(W.unboundedPreceding, 0))
    )
    peak = running.groupBy("run_id").agg(F.max("in_flight").alias("in_flight_max"))
    totals = message_history.groupBy("run_id").agg(
        F.max(F.coalesce(done_ts, "send_ts")).alias("last_ts"),
        F.coalesce(F.max(F.col("ack_id.batch_index") >= 0), F.lit(False)).alias("batching"),
        F.countDistinct(F.when(F.col("partition") >= 0, F.col("partition"))).alias("partitions"),
    )
    return totals.join(peak, ["run_id"], how="left")


def observed(seen: Column, complete: Column) -> Column:
    """A label seen on some subscription is true; not seen, it is false only when a
    subscription read the whole run (`complete`); else null: the run cannot tell."""
    return F.when(seen, True).when(complete, False)


def run_outcomes(run_summary: DataFrame, anomalies: DataFrame, outages: DataFrame) -> DataFrame:
    """Per run: acked loss, duplicates and outage ≥ 1 s from gold; and whether a reader fell
    short of acked messages (unseen, lost, skipped), with a storage event among the causes.

    A subscription with `unseen` messages stopped before the end (a reader stuck on an
    unreadable entry): what it did not read may be lost or duplicated. When every
    subscription of a run stopped so, its acked loss and duplicates are null (unknown)."""
    read_to_end = F.max(F.col("unseen") == 0)
    counts = run_summary.groupBy("run_id").agg(
        observed(F.max(F.col("lost") > 0), read_to_end).alias("acked_loss"),
        observed(F.max(F.col("duplicated") > 0), read_to_end).alias("duplicates"),
    )
    short = F.col("kind").isin(*UNREADABLE_KINDS)
    from_storage = F.exists("causes", lambda c: c["event_type"].isin(*STORAGE_CAUSES))
    unreadable = anomalies.groupBy("run_id").agg(
        F.max(short).alias("short_read"), F.max(short & from_storage).alias("short_by_storage")
    )
    long_outages = outages.groupBy("run_id").agg(
        F.max(F.col("duration_ms") >= OUTAGE_LABEL_MS).alias("outage_1s")
    )
    return (
        counts.join(unreadable, ["run_id"], how="left")
        .join(long_outages, ["run_id"], how="left")
        .select(
            "run_id",
            "acked_loss",
            F.coalesce("short_read", F.lit(False)).alias("short_read"),
            F.coalesce("short_by_storage", F.lit(False)).alias("short_by_storage"),
            "duplicates",
            F.coalesce("outage_1s", F.lit(False)).alias("outage_1s"),
        )
    )


def run_folders(run_files: DataFrame) -> DataFrame:
    """Per run: the folder its trace files sit in (a capture keeps its logs and ZooKeeper
    capture below the same folder)."""
    folder = F.regexp_replace("source_file", r"/[^/]*$", "")
    return (
        run_files.filter(F.col("table") == "producer_events")
        .groupBy("run_id")
        .agg(F.min(folder).alias("folder"))
    )


def run_recovery(infra_events: DataFrame, folders: DataFrame, faults: DataFrame) -> DataFrame:
    """Per run: whether a ledger stayed under-replicated (AutoRecovery could not repair it),
    whether AutoRecovery left any record (a ledger marked or repaired), whether a bookie was
    lost, and whether the bookies taken down registered again (their data survived).

    Infrastructure events belong to a run when their file lies under the run's folder. A run
    whose folder holds none has null here: its data cannot tell.
    """
    events = infra_events.join(
        F.broadcast(folders),
        F.col("source_file").startswith(F.concat(F.col("folder"), F.lit("/"))),
        how="inner",
    ).join(F.broadcast(faults.select("run_id", "fault_start")), ["run_id"], how="left")
    marked = F.col("event_type") == "ledger_under_replicated"
    repaired = F.col("event_type") == "ledger_re_replicated"
    per_ledger = (
        events.filter(marked | repaired)
        .groupBy("run_id", "ledger_id")
        .agg(
            F.max(F.when(marked, F.col("ts"))).alias("marked_at"),
            F.max(F.when(repaired, F.col("ts"))).alias("repaired_at"),
        )
        .select(
            "run_id",
            (
                F.col("marked_at").isNotNull()
                & (F.col("repaired_at").isNull() | (F.col("repaired_at") < F.col("marked_at")))
            ).alias("unrepaired"),
        )
    )
    returned = F.col("event_type") == "bookie_registered"
    after_fault = F.col("ts") > F.col("fault_start")
    seen = events.groupBy("run_id").agg(
        F.max(returned & after_fault).alias("bookie_returned"),
        F.max(F.col("event_type") == "bookie_lost").alias("bookie_lost"),
        F.max(marked | repaired).alias("audited"),
    )
    stuck = per_ledger.groupBy("run_id").agg(F.max("unrepaired").alias("unrepaired"))
    return seen.join(stuck, ["run_id"], how="left").select(
        "run_id",
        F.coalesce("bookie_returned", F.lit(False)).alias("bookie_returned"),
        F.coalesce("bookie_lost", F.lit(False)).alias("bookie_lost"),
        F.coalesce("unrepaired", F.lit(False)).alias("unrepaired"),
        F.coalesce("audited", F.lit(False)).alias("audited"),
    )


def build_run_features(
    run_events: DataFrame,
    run_files: DataFrame,
    message_history: DataFrame,
    run_summary: DataFrame,
    anomalies: DataFrame,
    outages: DataFrame,
    infra_events: DataFrame,
) -> DataFrame:
    """gold.run_features rows for every run with a verdict in gold.run_summary."""
    traffic = run_traffic(message_history)
    faults = run_faults(run_events, traffic.select("run_id", "last_ts"))
    recovery = run_recovery(infra_events, run_folders(run_files), faults)
    runs = run_summary.select("run_id").distinct()
    joined = (
        runs.join(run_settings(run_events), ["run_id"], how="left")
        .join(traffic, ["run_id"], how="left")
        .join(faults, ["run_id"], how="left")
        .join(run_outcomes(run_summary, anomalies, outages), ["run_id"], how="left")
        .join(recovery, ["run_id"], how="left")
    )
    fault_bookies = F.coalesce("fault_bookies", F.lit(0))
    fault_brokers = F.coalesce("fault_brokers", F.lit(0))
    bookies_lost = fault_bookies > 0
    # A bookie that comes back with a wiped disk (it registers again, empty) brings no copy.
    survived = (
        F.when(~bookies_lost, True)
        .when(F.coalesce("disks_wiped", F.lit(False)), False)
        .otherwise(F.col("bookies_restarted") | F.coalesce("bookie_returned", F.lit(False)))
    )
    # No bookie lost: nothing to repair. Lost, but no AutoRecovery record at all (no auditor
    # ran, as on the local cluster, or no infrastructure data): cannot tell. An auditor that
    # runs marks every ledger of a lost bookie under-replicated.
    recovery_impossible = (
        F.when(~bookies_lost, False)
        .when(~F.coalesce("audited", F.lit(False)), None)
        .otherwise(F.col("unrepaired"))
    )
    # A reader fell short of acked messages while copies were out of reach: a storage cause
    # was attributed, or the run's own infrastructure timeline lost a bookie.
    storage = F.col("short_by_storage") | F.coalesce("bookie_lost", F.lit(False))
    unreadable = F.when(F.col("short_read").isNull(), None).otherwise(F.col("short_read") & storage)
    rows = joined.select(
        "run_id",
        F.coalesce("source", F.lit("real")).alias("source"),
        "scenario",
        "ensemble_size",
        "write_quorum",
        "ack_quorum",
        "bookies",
        "brokers",
        "striping",
        F.coalesce("deduplication", F.lit(False)).alias("deduplication"),
        F.coalesce("batching", F.lit(False)).alias("batching"),
        F.coalesce("in_flight_max", F.lit(0)).alias("in_flight_max"),
        F.coalesce("partitions", F.lit(0)).alias("partitions"),
        F.coalesce("fault_kind", F.lit(NO_FAULT)).alias("fault_kind"),
        fault_bookies.alias("fault_bookies"),
        fault_brokers.alias("fault_brokers"),
        (F.col("bookies") - fault_bookies).alias("bookies_left"),
        (F.col("brokers") - fault_brokers).alias("brokers_left"),
        survived.alias("data_survived"),
        F.coalesce("fault_duration_s", F.lit(0.0)).alias("fault_duration_s"),
        "acked_loss",
        unreadable.alias("unreadable"),
        "duplicates",
        "outage_1s",
        recovery_impossible.alias("autorecovery_impossible"),
        F.current_timestamp().alias("computed_at"),
    )
    return conform(rows, RUN_FEATURES)
