"""Which findings in gold become alerts: one small transform per alert kind, merged by one step.

Each alert has a stable dedup key (a hash of its kind and the finding's own stable id), so the
same finding raises the same alert however often the job runs. Explanations and causes are
gold's own: an alert states no cause the data does not hold.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.config import AlertsConfig
from pulsar_audit.schemas import ALERT_DELIVERY, ALERTS, CAUSE, conform

CRITICAL, WARNING = "critical", "warning"
ALERT_KINDS = ("run_not_valid", "lost", "duplicated", "outage", "config_risk")


def dedup_key(kind: str, *columns: Column | str) -> Column:
    """sha2 of the alert kind and the finding's natural key: equal findings, equal keys."""
    parts = [F.lit(kind)] + [F.col(c) if isinstance(c, str) else c for c in columns]
    return F.sha2(
        F.concat_ws("\u0001", *[F.coalesce(p.cast("string"), F.lit("")) for p in parts]), 256
    )


def _no_causes() -> Column:
    return F.array().cast(T.ArrayType(CAUSE, False))


def _finish(df: DataFrame) -> DataFrame:
    """Stamp creation time and no deliveries yet; the ALERTS columns are the contract."""
    return conform(
        df.withColumn("created_at", F.current_timestamp()).withColumn(
            "deliveries", F.array().cast(T.ArrayType(ALERT_DELIVERY, False))
        ),
        ALERTS,
    )


def run_deduplication(run_events: DataFrame) -> DataFrame:
    """(run_id, deduplication): true when a config event of the run says deduplication is on."""
    return (
        run_events.filter(F.col("event") == "config")
        .groupBy("run_id")
        .agg(F.bool_or(F.coalesce("deduplication", F.lit(False))).alias("deduplication"))
    )


def alerts_for_runs(run_summary: DataFrame) -> DataFrame:
    """A verdict that is not "true": critical when false, a warning when unknown."""
    is_false = F.col("valid") == "false"
    not_valid = run_summary.filter(F.col("valid") != "true")
    reasons = F.when(F.size("reasons") > 0, F.array_join("reasons", "; ")).otherwise(
        "no reason recorded"
    )
    return not_valid.select(
        dedup_key("run_not_valid", "run_id", "topic", "subscription", "valid").alias("dedup_key"),
        F.lit("run_not_valid").alias("kind"),
        F.when(is_false, CRITICAL).otherwise(WARNING).alias("severity"),
        "run_id",
        "topic",
        "subscription",
        F.lit(None).cast("string").alias("finding_id"),
        F.format_string(
            "run %s: subscription %s%s of %s is %s",
            "run_id",
            "subscription",
            F.when(
                F.col("subscription_type").isNotNull(),
                F.format_string(" (%s)", "subscription_type"),
            ).otherwise(""),
            "topic",
            F.when(is_false, "not valid").otherwise("not known to be valid"),
        ).alias("title"),
        F.format_string(
            "valid=%s (sent %d, acked %d, received %d): %s",
            "valid",
            "sent",
            "acked",
            "received",
            reasons,
        ).alias("explanation"),
        _no_causes().alias("causes"),
        F.lit(None).cast("timestamp").alias("first_ts"),
    )


def _anomaly_alerts(anomalies: DataFrame, kind: str, title: Column) -> DataFrame:
    return anomalies.select(
        dedup_key(kind, "anomaly_id").alias("dedup_key"),
        F.lit(kind).alias("kind"),
        F.lit(CRITICAL).alias("severity"),
        "run_id",
        "topic",
        "subscription",
        F.col("anomaly_id").alias("finding_id"),
        title.alias("title"),
        "explanation",
        "causes",
        "first_ts",
    )


def _seq_text() -> Column:
    return F.when(
        F.col("seq_from") == F.col("seq_to"), F.format_string("seq %d", "seq_from")
    ).otherwise(F.format_string("seq %d–%d", "seq_from", "seq_to"))


def alerts_for_loss(anomalies: DataFrame) -> DataFrame:
    """Every block of acked messages lost (`unseen` is not loss: its consumers did not end)."""
    lost = anomalies.filter(F.col("kind") == "lost")
    title = F.format_string(
        "run %s: %d acked message(s) lost (%s from %s)", "run_id", "count", _seq_text(), "producer"
    )
    return _anomaly_alerts(lost, "lost", title)


def alerts_for_duplicates(anomalies: DataFrame, deduplication: DataFrame) -> DataFrame:
    """Duplicated blocks of runs whose config says broker deduplication was on."""
    deduplicated_runs = deduplication.filter(F.col("deduplication")).select("run_id")
    duplicated = anomalies.filter(F.col("kind") == "duplicated").join(
        F.broadcast(deduplicated_runs), ["run_id"], how="left_semi"
    )
    title = F.format_string(
        "run %s: %d message(s) stored twice with deduplication on (%s from %s)",
        "run_id",
        "count",
        _seq_text(),
        "producer",
    )
    return _anomaly_alerts(duplicated, "duplicated", title)


def alerts_for_outages(outages: DataFrame, threshold_ms: int) -> DataFrame:
    """Outages at least `threshold_ms` long (shorter ones stay in gold.outages only)."""
    long_ones = outages.filter(F.col("duration_ms") >= threshold_ms)
    return long_ones.select(
        dedup_key("outage", "outage_id").alias("dedup_key"),
        F.lit("outage").alias("kind"),
        F.lit(WARNING).alias("severity"),
        "run_id",
        "topic",
        F.lit(None).cast("string").alias("subscription"),
        F.col("outage_id").alias("finding_id"),
        F.format_string(
            "run %s: producer %s stalled for %.0f ms", "run_id", "producer", "duration_ms"
        ).alias("title"),
        "explanation",
        "causes",
        F.col("start").alias("first_ts"),
    )


def alerts_for_config_risk(config_risk: DataFrame, threshold: float) -> DataFrame:
    """Namespaces whose E/Qw/Qa the model scored at or above `threshold` for a label under a
    fault (one alert per cluster, namespace, fault, label and model version)."""
    risky = config_risk.filter(F.col("risk") >= threshold)
    config = F.format_string("E=%d Qw=%d Qa=%d", "ensemble_size", "write_quorum", "ack_quorum")
    return risky.select(
        dedup_key(
            "config_risk",
            "cluster",
            "namespace",
            "fault",
            "label",
            "ensemble_size",
            "write_quorum",
            "ack_quorum",
            "model_name",
            "model_version",
        ).alias("dedup_key"),
        F.lit("config_risk").alias("kind"),
        F.lit(WARNING).alias("severity"),
        F.lit(None).cast("string").alias("run_id"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("string").alias("subscription"),
        F.lit(None).cast("string").alias("finding_id"),
        F.format_string(
            "namespace %s (%s): %s risk %.2f under %s",
            "namespace",
            config,
            "label",
            "risk",
            "fault",
        ).alias("title"),
        F.format_string(
            "%s — model %s version %s (threshold %.2f), %d training run(s) with this setting and "
            "fault, %d with %s",
            "explanation",
            "model_name",
            "model_version",
            F.lit(threshold),
            "runs",
            "failed_runs",
            "label",
        ).alias("explanation"),
        _no_causes().alias("causes"),
        F.col("scored_at").alias("first_ts"),
    )


def candidate_alerts(
    run_summary: DataFrame,
    anomalies: DataFrame,
    outages: DataFrame,
    config_risk: DataFrame,
    run_events: DataFrame,
    settings: AlertsConfig,
) -> DataFrame:
    """gold.alerts rows for every finding that matters now (new or already raised)."""
    parts = [
        alerts_for_runs(run_summary),
        alerts_for_loss(anomalies),
        alerts_for_duplicates(anomalies, run_deduplication(run_events)),
        alerts_for_outages(outages, settings.outage_threshold_ms),
        alerts_for_config_risk(config_risk, settings.risk_threshold),
    ]
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.unionByName(part)
    return _finish(merged)


def alerts_for_provisional(provisional: DataFrame) -> DataFrame:
    """gold.provisional (`watch`) as alerts: one per provisional finding, raised when it is
    first seen, whatever becomes of it (a suspected loss or an outage in progress is critical,
    duplicates and out-of-order deliveries a warning), with the causes ranked by then (those
    that come later are in gold.provisional and the batch finding's alert)."""
    is_critical = F.col("kind").isin("suspected_loss", "outage_in_progress")
    where = F.when(
        F.col("subscription").isNotNull(), F.format_string(" on subscription %s", "subscription")
    ).otherwise("")
    seqs = F.when(F.col("seq_from").isNotNull(), F.concat(F.lit(", "), _seq_text())).otherwise("")
    return _finish(
        provisional.select(
            dedup_key("provisional", "finding_id").alias("dedup_key"),
            "kind",
            F.when(is_critical, CRITICAL).otherwise(WARNING).alias("severity"),
            "run_id",
            "topic",
            "subscription",
            "finding_id",
            F.format_string(
                "run %s: %s (provisional, producer %s%s)%s",
                "run_id",
                "kind",
                "producer",
                seqs,
                where,
            ).alias("title"),
            "explanation",
            F.coalesce("causes", _no_causes()).alias("causes"),
            F.col("started_at").alias("first_ts"),
        )
    )
