"""Table-level checks of the runs an ingest touched, written to bronze.check_results."""

from __future__ import annotations

import logging
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checks.incremental import gains_a_producer, metrics_with_new_rows
from checks.tables import TABLE_METRICS, check_runs, check_schemas, run_metrics
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.local_frames import local_frame

log = logging.getLogger(__name__)

EVENT_TABLES = ("producer_events", "consumer_events", "run_events")
METRICS = T.StructType(
    [T.StructField("run_id", T.StringType(), False)]
    + [T.StructField(m, T.LongType(), False) for m in TABLE_METRICS]
)
IS_NEW = "_new"


def check_ingested_runs(
    lakehouse: Lakehouse,
    run_ids: list[str],
    ingest_id: str,
    at: datetime,
    new_files: list[str] | None = None,
) -> None:
    """Judge every table-level expectation for `run_ids` over all of their bronze rows.

    new_files: the files this ingest has just added (a `watch` micro-batch's). When the runs'
    last check covered exactly their earlier files, their metrics are that check's plus what
    the new files' rows change (checks/incremental.py: the same rule, reading of the earlier
    bronze only the rows the new ones touch); else, and for `analyze`, the whole runs'."""
    if not run_ids:
        return
    in_runs = F.col("run_id").isin(run_ids)
    tables = {name: lakehouse.read(name) for name in EVENT_TABLES}
    schemas_ok = check_schemas(tables)
    producer, consumer, run = (tables[name].filter(in_runs) for name in EVENT_TABLES)
    quarantine = lakehouse.read("quarantine").filter(in_runs)
    previous = previous_metrics(lakehouse, run_ids, new_files) if new_files else None
    is_new = F.col("source_file").isin(new_files or [])
    flagged = [df.withColumn(IS_NEW, is_new) for df in (producer, consumer, run)]
    if previous is not None and gains_a_producer(flagged[0], IS_NEW).isEmpty():
        log.info(
            "table checks of %d run(s): their rows of %d new file(s)",
            len(run_ids),
            len(new_files or []),
        )
        metrics = metrics_with_new_rows(previous, *flagged, quarantine.filter(is_new), IS_NEW)
    else:
        metrics = run_metrics(producer, consumer, run, quarantine)
    results = check_runs(lakehouse.spark, metrics, schemas_ok, ingest_id, at)
    lakehouse.replace_where("check_results", results, {"run_id": run_ids, "level": ["table"]})


def previous_metrics(
    lakehouse: Lakehouse, run_ids: list[str], new_files: list[str]
) -> DataFrame | None:
    """The metrics of each of `run_ids`' last table check (METRICS), if that check covered
    exactly the run's files other than `new_files` (all ingested before it, none of these);
    None if one run's did not. Files × runs, checks × runs: small."""
    of_runs = F.col("run_id").isin(run_ids)
    is_new = F.col("source_file").isin(new_files)
    spans = (
        lakehouse.read("run_files")
        .filter(of_runs)
        .groupBy("run_id")
        .agg(
            F.max(F.when(~is_new, F.col("ingested_at"))).alias("earlier"),
            F.min(F.when(is_new, F.col("ingested_at"))).alias("new"),
        )
    )
    is_metric = (F.col("level") == "table") & F.col("expectation").isin(list(TABLE_METRICS))
    checked = (
        lakehouse.read("check_results")
        .filter(of_runs & is_metric)
        .groupBy("run_id")
        .agg(
            F.min("checked_at").alias("checked"),
            F.map_from_entries(F.collect_list(F.struct("expectation", "observed_value"))).alias(
                "values"
            ),
        )
    )
    rows = spans.join(checked, "run_id", how="inner").collect()
    covered = [
        r
        for r in rows
        if None not in (r["earlier"], r["new"])
        and r["earlier"] <= r["checked"] < r["new"]
        and set(r["values"]) == set(TABLE_METRICS)
    ]
    if len(covered) != len(run_ids):
        return None
    metrics = [(r["run_id"], *[int(r["values"][m]) for m in TABLE_METRICS]) for r in covered]
    return local_frame(lakehouse.spark, metrics, METRICS)


def runs_with_stale_checks(lakehouse: Lakehouse) -> list[str]:
    """Runs with a file ingested after their table-level checks last ran (or never checked).

    Both tables are small (files × runs, checks × runs).
    """
    newest_file = lakehouse.read("run_files").groupBy("run_id").agg(F.max("ingested_at").alias("f"))
    checked = (
        lakehouse.read("check_results")
        .filter(F.col("level") == "table")
        .groupBy("run_id")
        .agg(F.min("checked_at").alias("c"))
    )
    stale = newest_file.join(checked, on="run_id", how="left").filter(
        F.col("c").isNull() | (F.col("c") < F.col("f"))
    )
    return sorted(r["run_id"] for r in stale.select("run_id").collect())
