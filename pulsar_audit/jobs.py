"""The main job, as one function: ingest traces, logs and ZooKeeper captures → checks →
pipeline → infrastructure timeline → causes → summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse

INGEST_FIELDS = ("files", "records", "accepted", "quarantined")
LOG_SOURCES = ("broker", "bookie", "client")


def log_folders(path: str | Path) -> dict[str, list[Path]]:
    """Capture folders' logs/<source>/ directories under `path` (the harness's layout)."""
    root = Path(path)
    if not root.is_dir():
        return {}
    found: dict[str, list[Path]] = {}
    for source in LOG_SOURCES:
        dirs = sorted(d for d in root.rglob(source) if d.is_dir() and d.parent.name == "logs")
        if dirs:
            found[source] = dirs
    return found


def ingest_infrastructure(lakehouse: Lakehouse, path: str | Path) -> dict[str, int]:
    """Ingest the logs (logs/<source>/*.log) and ZooKeeper captures (*.zk.jsonl) under `path`."""
    from ingest.files import discover
    from ingest.logs import ingest_logs
    from ingest.zk_ingest import ZK_SUFFIXES, ingest_zk

    counts = {"log_files": 0, "log_lines": 0, "zk_files": 0, "zk_records": 0}
    for source, dirs in log_folders(path).items():
        for directory in dirs:
            report = ingest_logs(lakehouse, directory, source)
            counts["log_files"] += report.files
            counts["log_lines"] += report.lines
    if Path(path).is_dir() and discover(path, ZK_SUFFIXES):
        report = ingest_zk(lakehouse, path)
        counts["zk_files"] += report.files
        counts["zk_records"] += report.records
    return counts


def refresh_gold(lakehouse: Lakehouse, config: Config) -> list[str]:
    """Recompute changed runs, rebuild the infrastructure timeline, rank every finding's causes."""
    from pipelines.causes import attach_causes
    from pipelines.infra_events import build_infra_events
    from pipelines.job import run_pipeline

    recomputed = run_pipeline(lakehouse, config)
    build_infra_events(lakehouse)
    attach_causes(lakehouse, config)
    return recomputed


def analyze(
    lakehouse: Lakehouse, config: Config, path: str | Path, progress: Any = None
) -> dict[str, Any]:
    """Ingest everything under `path`, recompute, and report every run in the lakehouse.

    Returns the `analyze --json` object: {"ingest": {...}, "infra": {...}, "runs": [...],
    "outages": [...], "anomalies": [...]}; outages and anomalies carry their causes. When
    alert sinks are configured, new alerts are raised and sent, and "alerts" says how it went.
    """
    from ingest.traces import ingest_traces
    from pipelines.summary import summary_report

    report = ingest_traces(lakehouse, path, progress).as_dict()
    infra = ingest_infrastructure(lakehouse, path)
    refresh_gold(lakehouse, config)
    result = {
        "ingest": {k: report[k] for k in INGEST_FIELDS},
        "infra": infra,
        **summary_report(lakehouse),
    }
    if config.alerts.sinks:
        from serve.alert_job import raise_and_send

        result["alerts"] = raise_and_send(lakehouse, config)
    return result


def analyze_path(ctx: Any, path: str | Path) -> dict[str, Any]:
    """`analyze` for a CLI context (config and lakehouse already chosen)."""
    return analyze(ctx.lakehouse, ctx.config, path)
