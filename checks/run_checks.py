"""Table-level checks of the runs an ingest touched, written to bronze.check_results."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import functions as F

from checks.tables import check_runs, check_schemas, run_metrics
from pulsar_audit.delta_io import Lakehouse

EVENT_TABLES = ("producer_events", "consumer_events", "run_events")


def check_ingested_runs(
    lakehouse: Lakehouse, run_ids: list[str], ingest_id: str, at: datetime
) -> None:
    """Re-judge every table-level expectation for `run_ids` over all of their bronze rows."""
    if not run_ids:
        return
    schemas_ok = check_schemas({name: lakehouse.read(name) for name in EVENT_TABLES})
    # the runs' rows (a job that has just taken in a run's first files reads them from what
    # it wrote, not from the committed tables: pulsar_audit/deferred.py read_matching)
    runs = {"run_id": run_ids}
    producer, consumer, run = (lakehouse.read_matching(name, runs) for name in EVENT_TABLES)
    quarantine = lakehouse.read_matching("quarantine", runs)
    metrics = run_metrics(producer, consumer, run, quarantine)
    results = check_runs(lakehouse.spark, metrics, schemas_ok, ingest_id, at)
    lakehouse.replace_where("check_results", results, {"run_id": run_ids, "level": ["table"]})


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
