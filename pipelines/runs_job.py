"""The pipeline job: read bronze → build silver and gold for changed runs → replace their rows.

Which runs changed is decided from small tables only (bronze.run_files and the table-level
check results), never by scanning the events. Each changed run's bronze is read once and
persisted; frames that several steps need are derived once; each table is computed once,
kept for the steps after it (not read back), written once, side by side with the others, and
its row count is the write's own.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.build import Bronze, Shared, Silver, build_findings, build_summary, shared_frames
from pipelines.detectors import typed_checks
from pipelines.silver import build_delivery, build_message_history
from pulsar_audit.config import Config, PipelineConfig
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.local_frames import local_frame
from pulsar_audit.output import SparkProgress
from pulsar_audit.schemas import TABLES, conform
from pulsar_audit.spark import checkpointed, release, side_by_side, spark_step

log = logging.getLogger(__name__)

# Bump when a transform changes meaning, so that every run is recomputed once.
PIPELINE_VERSION = "2"
BRONZE_TABLES = ("producer_events", "consumer_events", "run_events", "check_results")


def read_bronze(lakehouse: Lakehouse, runs: list[str] | None = None) -> Bronze:
    """The bronze tables the pipeline reads, as they are now: `runs`' rows (None: every run's),
    read where they can be (`Lakehouse.read_matching`: a job's own rows without the committed
    table when its files cannot hold them)."""
    return Bronze(*(lakehouse.read_runs(table, runs) for table in BRONZE_TABLES))


def input_fingerprints(
    lakehouse: Lakehouse, pipeline: PipelineConfig, runs: list[str] | None = None
) -> dict[str, str]:
    """run_id → a hash of what the run's silver and gold are computed from.

    The rows each ingested file gave each table for the run (with the ingest that wrote
    them), the ingests of its table-level checks, and the pipeline's settings. Both tables
    are small (files × runs, checks × runs): nothing per message is read.

    runs: only these runs' (their rows alone are read; None: every run's).
    """
    settings = f"v{PIPELINE_VERSION};{pipeline.outage_threshold_ms};{pipeline.backoff_ladder_ms}"
    if runs is not None and not runs:
        return {}

    parts: dict[str, list[str]] = {}
    files = lakehouse.read_runs("run_files", runs).select(
        "run_id", "table", "source_file", "ingest_id", "rows"
    )
    for r in files.collect():
        parts.setdefault(r.run_id, []).append(f"{r.table}:{r.source_file}:{r.ingest_id}:{r.rows}")
    checks = (
        lakehouse.read_runs("check_results", runs)
        .filter(F.col("level") == "table")
        .select("run_id", "ingest_id")
        .distinct()
    )
    for r in checks.collect():
        parts.setdefault(r.run_id, []).append(f"checks:{r.ingest_id}")
    return {
        run: hashlib.sha256(";".join([settings, *sorted(p)]).encode()).hexdigest()
        for run, p in parts.items()
    }


def _state(lakehouse: Lakehouse, runs: list[str] | None) -> dict[str, str]:
    """run_id → the fingerprint the run was last computed from (silver.run_state), of `runs`
    (None: every run)."""
    if runs is not None and not runs:
        return {}
    state = lakehouse.read_runs("run_state", runs)
    return {
        r["run_id"]: r["input_fingerprint"]
        for r in state.select("run_id", "input_fingerprint").collect()
    }


def changed_runs(current: dict[str, str], previous: dict[str, str]) -> list[str]:
    """Runs whose fingerprint differs, including runs that left bronze (their rows go)."""
    return sorted(r for r in current.keys() | previous.keys() if current.get(r) != previous.get(r))


def run_pipeline(
    lakehouse: Lakehouse,
    config: Config,
    run_ids: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
    scope: list[str] | None = None,
) -> list[str]:
    """Recompute silver and gold for runs whose bronze changed; return those run_ids.

    run_ids: recompute exactly these runs, changed or not.
    scope: the only runs whose bronze can have changed (a job that took in only new files
    into a lakehouse whose other runs are computed: jobs/receipt.py `settled`); only their
    bookkeeping rows are read. None: every run's.
    """
    say = progress or (lambda _: None)
    current = input_fingerprints(lakehouse, config.pipeline, scope)
    previous = _state(lakehouse, scope)
    runs = sorted(set(run_ids)) if run_ids is not None else changed_runs(current, previous)
    if not runs:
        log.info("pipeline: no run changed since the last computation")
        return []
    log.info("pipeline: recomputing %d run(s): %s", len(runs), ", ".join(runs))
    scoped = read_bronze(lakehouse, runs)
    events = Bronze(
        scoped.producer_events.persist(StorageLevel.MEMORY_AND_DISK),
        scoped.consumer_events.persist(StorageLevel.MEMORY_AND_DISK),
        scoped.run_events,
        scoped.check_results,
    )
    shared = shared_frames(events).persist()
    try:
        with SparkProgress(lakehouse.spark, progress, f"pipeline: {len(runs)} run(s)"):
            _compute(lakehouse, config, events, shared, runs, say)
    finally:
        shared.unpersist()
        events.producer_events.unpersist()
        events.consumer_events.unpersist()
    rows = [(run, current[run]) for run in runs if run in current]
    run_state = local_frame(
        lakehouse.spark, rows, "run_id string, input_fingerprint string"
    ).withColumn("computed_at", F.current_timestamp())
    lakehouse.replace_runs("run_state", run_state, runs)
    return runs


def _compute(
    lakehouse: Lakehouse,
    config: Config,
    events: Bronze,
    shared: Shared,
    runs: list[str],
    say: Callable[[str], None],
) -> None:
    """Build silver, then gold, each table computed once and kept (checkpointed) for the steps
    after it; then write four side by side (one commit each, overlapping), anomalies last."""
    kept: dict[str, DataFrame] = {}
    reused: list[DataFrame] = []

    def reuse(df: DataFrame) -> DataFrame:
        """A detectors' intermediate frame read several times: persisted while they run."""
        reused.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return reused[-1]

    def keep(table: str, df: DataFrame) -> DataFrame:
        with spark_step(table):
            kept[table] = checkpointed(conform(df, TABLES[table].schema))
        return kept[table]

    try:
        say("silver: delivery and message history")
        delivery = keep("delivery", build_delivery(shared.receives))
        history = keep("message_history", build_message_history(events.producer_events, delivery))
        silver = Silver(history, delivery)
        say("gold: anomalies and outages")
        checks = typed_checks(shared.subscriptions)
        found_anomalies, found_outages = build_findings(
            events, shared, silver, config.pipeline, checks, reuse
        )
        anomalies = keep("anomalies", found_anomalies)
        for df in reused:
            df.unpersist()
        outages = keep("outages", found_outages)
        say("gold: run summary")
        keep("run_summary", build_summary(events, shared, silver, anomalies, outages))
        say("writing silver and gold")
        # gold.anomalies last: its version marks a finished recomputation (`--as-of VERSION`
        # reads every table as of just before the next one begins; serve/forensics.py)
        first = {table: df for table, df in kept.items() if table != "anomalies"}
        side_by_side(*(_replace(lakehouse, table, df, runs) for table, df in first.items()))
        _replace(lakehouse, "anomalies", kept["anomalies"], runs)()
    finally:
        for df in kept.values():
            release(df)
        for df in reused:
            df.unpersist()


def _replace(
    lakehouse: Lakehouse, table: str, df: DataFrame, runs: list[str]
) -> Callable[[], None]:
    """Replacing the runs' rows of `table` with `df`, as a step to run."""

    def replace() -> None:
        with spark_step(f"write {table}"):
            rows = lakehouse.replace_runs(table, df, runs)
        log.info("%s: %d rows for %d run(s)", table, rows, len(runs))

    return replace
