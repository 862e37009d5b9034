"""The main job, as one function: ingest traces → checks → pipeline → summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse

INGEST_FIELDS = ("files", "records", "accepted", "quarantined")


def analyze(
    lakehouse: Lakehouse, config: Config, path: str | Path, progress: Any = None
) -> dict[str, Any]:
    """Ingest the trace files under `path`, recompute changed runs, report every run.

    Returns the `analyze --json` object: {"ingest": {...}, "runs": [...], "outages": [...]}.
    """
    from ingest.traces import ingest_traces
    from pipelines.job import run_pipeline
    from pipelines.summary import summary_report

    report = ingest_traces(lakehouse, path, progress).as_dict()
    run_pipeline(lakehouse, config)
    return {"ingest": {k: report[k] for k in INGEST_FIELDS}, **summary_report(lakehouse)}


def analyze_path(ctx: Any, path: str | Path) -> dict[str, Any]:
    """`analyze` for a CLI context (config and lakehouse already chosen)."""
    return analyze(ctx.lakehouse, ctx.config, path)
