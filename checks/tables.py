"""Table-level checks per run: can this run's bronze support a verdict at all?

Relational facts (an ack without its send, a receive of a message never sent, a repeated
event_index, quarantined records) are aggregated per run in Spark, then GX judges the small
per-run frame. A failed expectation makes the run "unknown" for every later stage.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.attribution import with_sole_producer
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import CHECK_RESULTS, TABLES

_MESSAGE = ["run_id", "topic", "partition", "producer", "seq"]

# metric → (table it speaks for, minimum allowed, maximum allowed, meaning)
TABLE_METRICS: dict[str, tuple[str, int, int | None, str]] = {
    "sends": ("producer_events", 1, None, "the run has at least one send"),
    "orphan_acks": ("producer_events", 0, 0, "acks and nacks without a send of that message"),
    "duplicate_producer_event_index": (
        "producer_events",
        0,
        0,
        "producer events sharing (run, client, event_index)",
    ),
    "quarantined_producer_records": ("producer_events", 0, 0, "producer records quarantined"),
    "receives_never_sent": ("consumer_events", 0, 0, "receives of messages never sent"),
    "unresolved_producer": (
        "consumer_events",
        0,
        0,
        "receives without producer on a topic with several producers",
    ),
    "duplicate_consumer_event_index": (
        "consumer_events",
        0,
        0,
        "consumer events sharing (run, client, event_index)",
    ),
    "quarantined_consumer_records": ("consumer_events", 0, 0, "consumer records quarantined"),
    "conflicting_configs": ("run_events", 0, 0, "config events that disagree with each other"),
    "quarantined_run_records": ("run_events", 0, 0, "run records quarantined"),
}


def _count_where(condition: Column, name: str) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long").alias(name)


def _message_counts(producer: DataFrame, consumer: DataFrame) -> DataFrame:
    """Per run: sends, orphan_acks, receives_never_sent, unresolved_producer — from one
    aggregation per message of the producer events and the resolved receives together."""
    flags = ("_send", "_completion", "_receive", "_unresolved")

    def rows(df: DataFrame, producer_col: Column, **set_flags: Column) -> DataFrame:
        return df.select(
            *_MESSAGE[:3],
            producer_col.alias("producer"),
            "seq",
            *[set_flags.get(f, F.lit(0)).cast("long").alias(f) for f in flags],
        )

    receives = with_sole_producer(consumer.filter(F.col("event") == "receive"), producer)
    resolved = F.col("producer").isNotNull()
    events = rows(
        producer,
        F.col("client"),
        _send=F.col("event") == "send",
        _completion=F.col("event").isin("ack", "nack"),
    ).unionByName(rows(receives, F.col("producer"), _receive=resolved, _unresolved=~resolved))
    per_message = events.groupBy(*_MESSAGE).agg(*[F.sum(f).alias(f) for f in flags])
    # a message whose key has a null part matches no send (as a join on the key would have it)
    has_key = F.lit(True)
    for column in _MESSAGE:
        has_key = has_key & F.col(column).isNotNull()
    unmatched = ~(has_key & (F.col("_send") > 0))
    return per_message.groupBy("run_id").agg(
        F.sum("_send").alias("sends"),
        F.sum(F.when(unmatched, F.col("_completion")).otherwise(0)).alias("orphan_acks"),
        F.sum(F.when(unmatched, F.col("_receive")).otherwise(0)).alias("receives_never_sent"),
        F.sum("_unresolved").alias("unresolved_producer"),
    )


def _duplicate_event_indexes(producer: DataFrame, consumer: DataFrame) -> DataFrame:
    """Per run: (run, client, event_index) shared by several producer / consumer events."""
    keyed = (
        producer.select("run_id", "client", "event_index", F.lit("producer").alias("_side"))
        .unionByName(
            consumer.select("run_id", "client", "event_index", F.lit("consumer").alias("_side"))
        )
        .filter(F.col("event_index").isNotNull())
    )
    repeated = (
        keyed.groupBy("run_id", "_side", "client", "event_index")
        .agg(F.count(F.lit(1)).alias("n"))
        .filter(F.col("n") > 1)
    )
    return repeated.groupBy("run_id").agg(
        *[
            _count_where(F.col("_side") == side, f"duplicate_{side}_event_index")
            for side in ("producer", "consumer")
        ]
    )


def run_metrics(
    producer: DataFrame, consumer: DataFrame, run: DataFrame, quarantine: DataFrame
) -> DataFrame:
    """One row per run with every metric of TABLE_METRICS (inputs already filtered to the runs).

    A few aggregations unioned and summed per run (no join per metric): a check costs a
    handful of Spark stages whatever the number of metrics.
    """
    config_cols = ["ensemble_size", "write_quorum", "ack_quorum", "deduplication"]
    configs = (
        run.filter(F.col("event") == "config")
        .groupBy("run_id")
        .agg(
            (F.countDistinct(F.struct(*config_cols)) - 1).cast("long").alias("conflicting_configs")
        )
    )
    quarantined = quarantine.groupBy("run_id").agg(
        *[
            _count_where(F.col("target_table") == f"{kind}_events", f"quarantined_{kind}_records")
            for kind in ("producer", "consumer", "run")
        ]
    )
    parts = [
        _message_counts(producer, consumer),
        _duplicate_event_indexes(producer, consumer),
        configs,
        quarantined,
        # every run with a row anywhere (the final aggregation's partial step dedupes them)
        *[df.select("run_id") for df in (producer, consumer, run, quarantine)],
    ]
    metrics = [m for m in TABLE_METRICS]
    every = None
    for part in parts:
        widened = part.select(
            "run_id",
            *[
                (F.col(m) if m in part.columns else F.lit(None)).cast("long").alias(m)
                for m in metrics
            ],
        )
        every = widened if every is None else every.unionByName(widened)
    return every.groupBy("run_id").agg(
        *[F.coalesce(F.sum(m), F.lit(0)).cast("long").alias(m) for m in metrics]
    )


def _expectations() -> list:
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectColumnValuesToBeBetween(
            column=metric, min_value=low, max_value=high, meta={"rule": metric}
        )
        for metric, (_, low, high, _) in TABLE_METRICS.items()
    ]


def check_runs(
    spark: SparkSession,
    metrics: DataFrame,
    schemas_ok: dict[str, bool],
    ingest_id: str,
    at: datetime,
) -> DataFrame:
    """GX judges the per-run metrics; one check_results row per (run, metric), level 'table'.

    schemas_ok: per bronze table, whether its columns match the contract (see check_schemas);
    a mismatch fails every run. `metrics` has one row per run: collecting it is small.
    """
    from checks.gx import validate

    rows = metrics.collect()
    judged = pd.DataFrame([row.asDict() for row in rows], columns=metrics.columns)
    outcomes = validate(judged, "run_tables", _expectations(), index_columns=["run_id"])
    failed = {o.name: {i["run_id"] for i in o.unexpected_index} for o in outcomes}
    results = [
        (
            row["run_id"],
            TABLE_METRICS[metric][0],
            metric,
            None,
            "table",
            row["run_id"] not in failed[metric],
            str(row[metric]),
            None,
            ingest_id,
            at,
        )
        for row in rows
        for metric in TABLE_METRICS
    ]
    results += [
        (row["run_id"], table, "schema", None, "table", ok, None, None, ingest_id, at)
        for row in rows
        for table, ok in schemas_ok.items()
    ]
    return local_frame(spark, results, CHECK_RESULTS)


def schema_drift(stored: T.StructType, contract: T.StructType) -> list[str]:
    """How a stored table's columns differ from its contract: missing, extra, retyped.

    Every write conforms to the contract, so a difference means the table was written by
    another (older) version of pulsar-audit and its rows may not mean what the contract says.
    """
    have = {f.name: f.dataType.simpleString() for f in stored.fields}
    want = {f.name: f.dataType.simpleString() for f in contract.fields}
    drift = [f"missing {n}" for n in want if n not in have]
    drift += [f"extra {n}" for n in have if n not in want]
    drift += [f"{n} is {have[n]}, not {t}" for n, t in want.items() if have.get(n, t) != t]
    return drift


def check_schemas(tables: dict[str, DataFrame]) -> dict[str, bool]:
    """Whether each bronze table as read matches its contract: the same names (in any
    order: a column added since is appended where an older table gains it) and types.

    tables: as `Lakehouse.read` gives them, with the nullable columns added to the contract
    since the table was written already there (null in its older rows: what an older trace
    would hold), so that such an additive change passes; a column dropped, retyped or
    unknown fails.
    """
    outcomes = {}
    for name, df in tables.items():
        import great_expectations.expectations as gxe

        from checks.gx import validate

        expectation = gxe.ExpectTableColumnsToMatchSet(
            column_set=TABLES[name].schema.fieldNames(), exact_match=True, meta={"rule": "schema"}
        )
        columns = pd.DataFrame(columns=df.columns)
        names_ok = validate(columns, f"{name}_schema", [expectation])[0].success
        outcomes[name] = names_ok and not schema_drift(df.schema, TABLES[name].schema)
    return outcomes
