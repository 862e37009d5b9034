"""Ingest as the jobs run it, entered once per job: the input folder's files, listed once
(ingest/inputs.py), handed to each source; traces gated row by row by the checks' rules in
the same pass, then the table-level checks of every run the ingest touched (a `watch`
micro-batch leaves them to the run's end: `check_stale_runs`)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checks.gate import ROW_GATE
from checks.run_checks import check_ingested_runs, runs_with_stale_checks
from ingest import traces
from ingest.inputs import Inputs, list_inputs
from ingest.logs import ingest_log_files
from ingest.traces import IngestReport
from ingest.zk_ingest import ingest_zk
from jobs.stages import Progress, stage
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.spark import session_settings, side_by_side
from pulsar_audit.storage import FileStat


def ingest_traces(
    lakehouse: Lakehouse,
    path: str | Path,
    progress: Progress | None = None,
    listed: list[FileStat] | None = None,
    table_checks: bool = True,
    settled: bool = False,
) -> IngestReport:
    """Ingest every new trace file under `path` (ingest/traces.py), then (with
    `table_checks`) run the table-level checks of the runs it touched and of any run left
    unchecked; the report's runs are those checked.

    listed: the files under `path` when the caller has listed them already.
    table_checks: False leaves the runs' table-level checks to a later call of
    `check_stale_runs` (a `watch` micro-batch: a run still being written is judged whole once
    it has ended); the report's runs are then those the ingest touched.
    settled: every run the lakehouse held before this ingest is checked (jobs/receipt.py
    `settled`) and none of these files was ingested before: only the runs it takes in can
    lack their checks, and the bookkeeping tables are not read to find others.
    """
    report = traces.ingest_traces(lakehouse, path, ROW_GATE, progress, listed)
    if not table_checks:
        return report
    # an ingest killed after its last manifest write but before the checks left runs unchecked
    stale = [] if settled else runs_with_stale_checks(lakehouse)
    runs = sorted(set(report.runs) | set(stale))
    _check(lakehouse, runs, progress)
    return replace(report, runs=runs)


def check_stale_runs(
    lakehouse: Lakehouse, runs: list[str] | None = None, progress: Progress | None = None
) -> list[str]:
    """The table-level checks of those of `runs` (None: every run) with a file ingested since
    their checks last ran (or never checked), so that no verdict is computed without them; the
    runs checked."""
    stale = runs_with_stale_checks(lakehouse)
    if runs is not None:
        stale = sorted(set(stale) & set(runs))
    _check(lakehouse, stale, progress)
    return stale


def _check(lakehouse: Lakehouse, runs: list[str], progress: Progress | None) -> None:
    if runs:
        if progress:
            progress(f"checking {len(runs)} run(s)")
        now = datetime.now(UTC).replace(tzinfo=None)
        check_ingested_runs(lakehouse, runs, str(uuid.uuid4()), now)


def ingest_infrastructure(
    lakehouse: Lakehouse,
    path: str | Path,
    progress: Progress | None = None,
    inputs: Inputs | None = None,
) -> dict[str, int]:
    """Ingest the logs (logs/<source>/*.log) and ZooKeeper captures (*.zk.jsonl) under `path`."""
    counts = {"log_files": 0, "log_lines": 0, "zk_files": 0, "zk_records": 0}
    if inputs is None:
        is_folder, inputs = list_inputs(lakehouse, path)
        if not is_folder:
            return counts
    if inputs.logs:
        for report in ingest_log_files(lakehouse, inputs.logs, progress=progress).values():
            counts["log_files"] += report.files
            counts["log_lines"] += report.lines
    report = ingest_zk(lakehouse, path, progress, listed=inputs.zk)
    counts["zk_files"] += report.files
    counts["zk_records"] += report.records
    return counts


def ingest_inputs(
    lakehouse: Lakehouse,
    path: str | Path,
    is_folder: bool,
    inputs: Inputs,
    progress: Progress | None = None,
    table_checks: bool = True,
    settled: bool = False,
) -> tuple[dict[str, Any], dict[str, int]]:
    """Everything under `path` into bronze: the traces (with their checks) beside the logs
    and ZooKeeper captures; (the trace report as a dict, the infrastructure counts).

    is_folder, inputs: `path`'s listing (`list_inputs`); a single file is a trace.
    table_checks, settled: see `ingest_traces`.
    """

    def traces() -> dict[str, Any]:
        with stage("ingest traces", progress):
            listed = inputs.traces if is_folder else None
            report = ingest_traces(lakehouse, path, progress, listed, table_checks, settled)
            return report.as_dict()

    def infrastructure() -> dict[str, int]:
        with stage("ingest logs and ZooKeeper captures", progress):
            return ingest_infrastructure(
                lakehouse, path, progress, inputs if is_folder else Inputs()
            )

    # different files into different tables (both note theirs in bronze.ingested_files), with
    # the ingest's own session settings (pulsar_audit.spark.for_input) around both
    with session_settings(lakehouse.spark, lakehouse.config.spark.ingest_conf):
        return side_by_side(traces, infrastructure)
