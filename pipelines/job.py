"""The pipeline job: read bronze → build silver and gold for changed runs → replace their rows."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.build import Bronze, Silver, build_findings, build_silver, build_summary
from pulsar_audit.config import Config, PipelineConfig
from pulsar_audit.delta_io import Lakehouse

log = logging.getLogger(__name__)

# Bump when a transform changes meaning, so that every run is recomputed once.
PIPELINE_VERSION = "1"
BRONZE_TABLES = ("producer_events", "consumer_events", "run_events", "check_results")


def read_bronze(lakehouse: Lakehouse) -> Bronze:
    """The bronze tables the pipeline reads, as they are now."""
    return Bronze(*(lakehouse.read(table) for table in BRONZE_TABLES))


def input_fingerprints(bronze: Bronze, pipeline: PipelineConfig) -> DataFrame:
    """(run_id, input_fingerprint): a hash of the run's (table, ingest_id, rows) and settings.

    One cheap aggregate per run: new ingests, new check results or changed pipeline
    settings change it; nothing per message leaves Spark.
    """
    settings = f"v{PIPELINE_VERSION};{pipeline.outage_threshold_ms};{pipeline.backoff_ladder_ms}"
    tagged = [
        df.select("run_id", "ingest_id", F.lit(name).alias("table"))
        for name, df in zip(BRONZE_TABLES, bronze.tables(), strict=True)
    ]
    rows = tagged[0].unionByName(tagged[1]).unionByName(tagged[2]).unionByName(tagged[3])
    per_ingest = rows.groupBy("run_id", "table", "ingest_id").agg(F.count("*").alias("rows"))
    part = F.concat_ws(":", "table", "ingest_id", F.col("rows").cast("string"))
    parts = F.array_join(F.array_sort(F.collect_list(part)), ",")
    return per_ingest.groupBy("run_id").agg(
        F.sha2(F.concat_ws(";", F.lit(settings), parts), 256).alias("input_fingerprint")
    )


def changed_runs(current: dict[str, str], previous: dict[str, str]) -> list[str]:
    """Runs whose fingerprint differs, including runs that left bronze (their rows go)."""
    return sorted(r for r in current.keys() | previous.keys() if current.get(r) != previous.get(r))


def _replace(lakehouse: Lakehouse, table: str, df: DataFrame, runs: list[str]) -> DataFrame:
    """Replace the runs' rows of `table`, log the row count, and return what was written."""
    lakehouse.replace_runs(table, df, runs)
    written = lakehouse.read(table).filter(F.col("run_id").isin(runs))
    log.info("%s: %d rows for %d run(s)", table, written.count(), len(runs))
    return written


def run_pipeline(
    lakehouse: Lakehouse, config: Config, run_ids: list[str] | None = None
) -> list[str]:
    """Recompute silver and gold for runs whose bronze changed; return those run_ids.

    run_ids: recompute exactly these runs, changed or not.
    """
    bronze = read_bronze(lakehouse)
    fingerprints = input_fingerprints(bronze, config.pipeline)
    current = {r["run_id"]: r["input_fingerprint"] for r in fingerprints.collect()}
    state = lakehouse.read("run_state").select("run_id", "input_fingerprint").collect()
    previous = {r["run_id"]: r["input_fingerprint"] for r in state}
    runs = sorted(set(run_ids)) if run_ids is not None else changed_runs(current, previous)
    if not runs:
        log.info("pipeline: no run changed since the last computation")
        return []
    log.info("pipeline: recomputing %d run(s): %s", len(runs), ", ".join(runs))
    scoped = bronze.for_runs(runs)
    built = build_silver(scoped)
    silver = Silver(
        message_history=_replace(lakehouse, "message_history", built.message_history, runs),
        delivery=_replace(lakehouse, "delivery", built.delivery, runs),
    )
    found_anomalies, found_outages = build_findings(scoped, silver, config.pipeline)
    anomalies = _replace(lakehouse, "anomalies", found_anomalies, runs)
    outages = _replace(lakehouse, "outages", found_outages, runs)
    _replace(lakehouse, "run_summary", build_summary(scoped, silver, anomalies, outages), runs)
    run_state = fingerprints.filter(F.col("run_id").isin(runs)).select(
        "run_id", "input_fingerprint", F.current_timestamp().alias("computed_at")
    )
    _replace(lakehouse, "run_state", run_state, runs)
    return runs
