"""Trace ingest as the jobs run it: the files into bronze, gated row by row by the checks'
rules in the same pass, then the table-level checks of every run the ingest touched."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from checks.gate import ROW_GATE
from checks.run_checks import check_ingested_runs, runs_with_stale_checks
from ingest import traces
from ingest.skeleton import Progress
from ingest.traces import IngestReport
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.storage import FileStat


def ingest_traces(
    lakehouse: Lakehouse,
    path: str | Path,
    progress: Progress | None = None,
    listed: list[FileStat] | None = None,
) -> IngestReport:
    """Ingest every new trace file under `path` (ingest/traces.py), then check the runs it
    touched; the report's runs are those checked.

    listed: the files under `path` when the caller has listed them already.
    """
    report = traces.ingest_traces(lakehouse, path, ROW_GATE, progress, listed)
    # an ingest killed after its last manifest write but before the checks left runs unchecked
    runs = sorted(set(report.runs) | set(runs_with_stale_checks(lakehouse)))
    if runs:
        if progress:
            progress(f"checking {len(runs)} run(s)")
        now = datetime.now(UTC).replace(tzinfo=None)
        check_ingested_runs(lakehouse, runs, str(uuid.uuid4()), now)
    return replace(report, runs=runs)
