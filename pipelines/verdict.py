"""The check step: merge counts and anomalies into one verdict per (run, topic, subscription)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_audit.kinds import ANOMALY_KINDS, PRODUCER_KINDS, RUN_COUNTS, VIOLATION_KINDS
from pulsar_audit.schemas import RUN_SUMMARY, conform

SUBSCRIPTION_KEY = ["run_id", "topic", "subscription"]
COUNTS = [*RUN_COUNTS, "outages", "unattributed"]


def failed_table_checks(check_results: DataFrame) -> DataFrame:
    """(run_id, failed_checks): expectations that failed at table level, sorted."""
    failed = (F.col("level") == "table") & ~F.col("success")
    return (
        check_results.filter(failed)
        .groupBy("run_id")
        .agg(F.array_sort(F.collect_set("expectation")).alias("failed_checks"))
    )


def _counts(
    message_history: DataFrame,
    anomalies: DataFrame,
    outages: DataFrame,
) -> tuple[DataFrame, DataFrame, tuple[DataFrame, DataFrame], DataFrame]:
    """Per-topic message counts, per-subscription received and anomaly counts, outages."""
    per_topic = message_history.groupBy("run_id", "topic").agg(
        *[F.sum(F.col(c).cast("long")).alias(c) for c in ("sent", "acked", "nacked")]
    )
    # a message's `subscriptions` holds one entry per subscription it reached: one narrow pass
    # over silver.message_history, no count of distinct messages over silver.delivery
    received = (
        message_history.select("run_id", "topic", F.explode("subscriptions").alias("entry"))
        .groupBy("run_id", "topic", F.col("entry.subscription").alias("subscription"))
        .agg(F.count("*").alias("received"))
    )
    is_kind = {kind: F.col("kind") == kind for kind in ANOMALY_KINDS}
    subscription_kinds = [k for k in ANOMALY_KINDS if k not in PRODUCER_KINDS]
    per_subscription = anomalies.groupBy(*SUBSCRIPTION_KEY).agg(
        *[F.sum(F.when(is_kind[k], F.col("count"))).alias(k) for k in subscription_kinds]
    )
    per_producer_topic = anomalies.groupBy("run_id", "topic").agg(
        *[F.sum(F.when(is_kind[k], F.col("count"))).alias(k) for k in PRODUCER_KINDS]
    )
    per_kind = (per_subscription, per_producer_topic)
    outage_counts = outages.groupBy("run_id", "topic").agg(F.count("*").alias("outages"))
    return per_topic, received, per_kind, outage_counts


def _reasons() -> Column:
    """Why the verdict is not simply true, most decisive first."""
    checks = F.transform("failed_checks", lambda e: F.concat(F.lit("check failed: "), e))
    ends = F.transform(
        "missing_end", lambda c: F.concat(F.lit("consumer "), c, F.lit(" has no end event"))
    )
    violated = [
        F.when(F.col(kind) > 0, F.format_string(f"{kind}=%d", F.col(kind)))
        for kind in VIOLATION_KINDS
        if kind != "lost"
    ]
    counted = F.array(
        F.when(F.col("lost") > 0, F.format_string("lost=%d", F.col("lost"))),
        *violated,
        F.when(
            (F.col("duplicated") > 0) & F.col("deduplication"),
            F.format_string("duplicated=%d with deduplication on", F.col("duplicated")),
        ),
        F.when(
            F.col("unattributed") > 0,
            F.format_string(
                "unattributed=%d: receives without a producer on a topic with several producers",
                F.col("unattributed"),
            ),
        ),
        F.when(F.col("consumers") == 0, F.lit("no consumer of this topic was traced")),
        F.when(
            F.size("types") > 1,
            F.format_string(
                "the trace names several subscription types (%s) for one subscription",
                F.array_join("types", ", "),
            ),
        ),
    )
    return F.array_compact(F.concat(checks, counted, ends))


def _valid() -> Column:
    """A failed table check makes the input untrustworthy: unknown before anything else."""
    violated = F.lit(False)
    for kind in VIOLATION_KINDS:
        violated = violated | (F.col(kind) > 0)
    violated = violated | ((F.col("duplicated") > 0) & F.col("deduplication"))
    incomplete = ~F.col("all_ended") | (F.col("unattributed") > 0) | (F.size("types") > 1)
    return (
        F.when(F.size("failed_checks") > 0, "unknown")
        .when(violated, "false")
        .when(incomplete, "unknown")
        .otherwise("true")
    )


def _unchecked() -> Column:
    """The promises of the subscription's type this trace could not check (docs/
    subscription-types.md)."""
    kind = F.col("subscription_type")
    return F.array_compact(
        F.array(
            F.when(
                kind.isNull() & (F.col("consumers") > 0),
                F.lit(
                    "subscription type not in the trace: order judged per partition, as for "
                    "Exclusive and Failover; key order and ownership not checked"
                ),
            ),
            F.when(
                (kind == "Key_Shared") & ~F.col("keyed"),
                F.lit(
                    "no message keys in the trace: per-key order, key ownership and stuck "
                    "keys not checked"
                ),
            ),
            F.when(
                kind == "Shared",
                F.lit("Shared promises no order: reordering is reported, not judged"),
            ),
        )
    )


def summarize(
    message_history: DataFrame,
    anomalies: DataFrame,
    outages: DataFrame,
    subscriptions: DataFrame,
    unattributed: DataFrame,
    deduplication: DataFrame,
    check_results: DataFrame,
) -> DataFrame:
    """gold.run_summary: counts, valid = "true" / "false" / "unknown" and the reasons.

    subscriptions, unattributed: from `pipelines.silver`; deduplication: from
    `pipelines.detect_duplicated.run_deduplication`; check_results: bronze.check_results.
    """
    per_topic, received, per_kind, outage_counts = _counts(message_history, anomalies, outages)
    joined = (
        subscriptions.join(per_topic, ["run_id", "topic"], how="left")
        .join(received, SUBSCRIPTION_KEY, how="left")
        .join(per_kind[0], SUBSCRIPTION_KEY, how="left")
        .join(per_kind[1], ["run_id", "topic"], how="left")
        .join(outage_counts, ["run_id", "topic"], how="left")
        .join(unattributed, SUBSCRIPTION_KEY, how="left")
    )
    with_run = joined.join(F.broadcast(deduplication), ["run_id"], how="left").join(
        F.broadcast(failed_table_checks(check_results)), ["run_id"], how="left"
    )
    filled = with_run.select(
        *SUBSCRIPTION_KEY,
        "subscription_type",
        "types",
        "keyed",
        "consumers",
        "all_ended",
        "missing_end",
        *[F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in COUNTS],
        F.coalesce("deduplication", F.lit(False)).alias("deduplication"),
        F.coalesce("failed_checks", F.array().cast("array<string>")).alias("failed_checks"),
    )
    judged = filled.select("*", _valid().alias("valid"), _reasons().alias("reasons"))
    judged = judged.withColumn("unchecked", _unchecked())
    return conform(judged, RUN_SUMMARY)
