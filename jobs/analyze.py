"""The main job, as one function: ingest traces, logs and ZooKeeper captures → checks →
pipeline → infrastructure timeline → causes → summary.

Every stage is skipped when its inputs did not change: a rerun on the same folder hashes the
files, finds nothing new, and only reads the small gold tables back.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ingest.logs import LOG_SUFFIXES, ingest_log_folders
from ingest.skeleton import discover
from ingest.traces import TRACE_SUFFIXES, ingest_traces
from ingest.zk_ingest import ZK_SUFFIXES, ingest_zk
from jobs import receipt
from pipelines.causes import refresh_causes
from pipelines.infra_events import patterns_fingerprint, refresh_infra_events
from pipelines.job import PIPELINE_VERSION, run_pipeline
from pipelines.recognition import recognized_by_source
from pipelines.summary import summary_report
from pulsar_audit import faults
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.schemas import TABLES
from serve.alert_job import raise_and_send

log = logging.getLogger(__name__)

INGEST_FIELDS = ("files", "records", "accepted", "quarantined")
# Every table silver and gold are computed from (none of them is written by refresh_gold).
GOLD_INPUTS = (
    "producer_events",
    "consumer_events",
    "run_events",
    "check_results",
    "run_files",
    "broker_log",
    "bookie_log",
    "client_log",
    "zk_changes",
)
LOG_SOURCES = ("broker", "bookie", "client")
Progress = Callable[[str], None]


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


def check_inputs(path: str | Path) -> None:
    """Fail before anything starts when `path` holds no trace, log or ZooKeeper file."""
    root = Path(path)
    if not root.exists():
        raise InputError(f"{root}: no such file or directory")
    if root.is_file():
        return
    traces = discover(root, TRACE_SUFFIXES, exclude=ZK_SUFFIXES)
    logs = [
        f for dirs in log_folders(root).values() for d in dirs for f in discover(d, LOG_SUFFIXES)
    ]
    if not traces and not logs and not discover(root, ZK_SUFFIXES):
        raise InputError(
            f"{root}: no trace files (*.jsonl, *.jsonl.gz), no logs (logs/broker|bookie|client/"
            f"*.log) and no ZooKeeper captures (*.zk.jsonl) found there"
        )


def ingest_infrastructure(
    lakehouse: Lakehouse, path: str | Path, progress: Progress | None = None
) -> dict[str, int]:
    """Ingest the logs (logs/<source>/*.log) and ZooKeeper captures (*.zk.jsonl) under `path`."""
    counts = {"log_files": 0, "log_lines": 0, "zk_files": 0, "zk_records": 0}
    folders = log_folders(path)
    if folders:
        for report in ingest_log_folders(lakehouse, folders, progress=progress).values():
            counts["log_files"] += report.files
            counts["log_lines"] += report.lines
    if Path(path).is_dir():
        report = ingest_zk(lakehouse, path, progress)
        counts["zk_files"] += report.files
        counts["zk_records"] += report.records
    return counts


def refresh_gold(
    lakehouse: Lakehouse,
    config: Config,
    run_ids: list[str] | None = None,
    progress: Progress | None = None,
) -> list[str]:
    """Recompute changed runs, rebuild the infrastructure timeline, rank every finding's causes.

    Each of the three is skipped when its inputs did not change.
    """
    fingerprint = gold_inputs(lakehouse, config)
    if run_ids is None and lakehouse.stage_is_current("gold", fingerprint):
        log.info("gold: no input changed since the last analyze, nothing to recompute")
        return []
    with stage("pipeline", progress):
        recomputed = run_pipeline(lakehouse, config, run_ids, progress)
    with stage("infrastructure timeline", progress):
        refresh_infra_events(lakehouse)
    with stage("causes", progress):
        refresh_causes(lakehouse, config)
    lakehouse.record_stage("gold", fingerprint)
    return recomputed


@contextmanager
def stage(name: str, progress: Progress | None) -> Iterator[None]:
    """Announce a stage on the live line and log how long it took (`-v`: where time goes)."""
    faults.point(f"stage:{name}")
    if progress:
        progress(name)
    started = time.monotonic()
    yield
    log.info("stage %s: %.1f s", name, time.monotonic() - started)


def gold_inputs(lakehouse: Lakehouse, config: Config) -> str:
    """A fingerprint of everything gold is computed from: bronze's versions and the settings.

    Equal to the one recorded by the last complete refresh ⇒ silver and gold are current.
    """
    versions = lakehouse.versions(GOLD_INPUTS)
    code = f"{PIPELINE_VERSION};{patterns_fingerprint()}"
    return hashlib.sha256(
        f"{code};{config.pipeline};{sorted(versions.items())}".encode()
    ).hexdigest()


def analyze(
    lakehouse: Lakehouse, config: Config, path: str | Path, progress: Progress | None = None
) -> dict[str, Any]:
    """Ingest everything under `path`, recompute, and report every run in the lakehouse.

    Returns the `analyze --json` object: {"ingest": {...}, "infra": {...}, "runs": [...],
    "outages": [...], "anomalies": [...]}; outages and anomalies carry their causes. When
    alert sinks are configured, new alerts are raised and sent, and "alerts" says how it went;
    when logs were ingested, "recognized" says per source how many entries a pattern knew.
    """
    check_inputs(path)
    with stage("create tables", progress):
        lakehouse.create_all()
    with stage("ingest traces", progress):
        report = ingest_traces(lakehouse, path, progress).as_dict()
    with stage("ingest logs and ZooKeeper captures", progress):
        infra = ingest_infrastructure(lakehouse, path, progress)
    refresh_gold(lakehouse, config, progress=progress)
    keeps_receipt = receipt.applies(config)
    before = lakehouse.versions(TABLES) if keeps_receipt else None
    with stage("summary", progress):
        summary = summary_report(lakehouse)
    result = {"ingest": {k: report[k] for k in INGEST_FIELDS}, "infra": infra, **summary}
    if infra["log_files"]:  # what the patterns understood of the logs just taken in
        with stage("log recognition", progress):
            result["recognized"] = recognized_by_source(lakehouse)
    if config.alerts.sinks:
        with stage("alerts", progress):
            result["alerts"] = raise_and_send(lakehouse, config)
    # Nothing else wrote while the result was read back: a rerun may answer from it.
    if keeps_receipt and lakehouse.versions(TABLES) == before:
        receipt.write_receipt(config, path, before, result)
    return result
