"""The main job, as one function: ingest traces, logs and ZooKeeper captures → checks →
pipeline → infrastructure timeline → causes → summary.

Every stage is skipped when its inputs did not change: a rerun on the same folder hashes the
files, finds nothing new, and only reads the small gold tables back.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.inputs import Inputs, list_inputs
from jobs import receipt
from jobs.context import Context
from jobs.ingest import ingest_inputs
from jobs.stages import Progress, stage
from pipelines.causes_job import CAUSE_OUTPUTS, CausesBefore, causes_scope, refresh_causes
from pipelines.infra_events import patterns_fingerprint, refresh_infra_events
from pipelines.runs_job import PIPELINE_VERSION, run_pipeline
from pulsar_audit.config import Config
from pulsar_audit.deferred import DeferredLakehouse, defers
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import TABLES
from pulsar_audit.spark import local_input_bytes, side_by_side
from pulsar_audit.storage import FileStore, precheck_local
from serve.alert_job import raise_and_send
from serve.quarantine import quarantined_in
from serve.recognition import recognized_by_source
from serve.summary import other_run_count, runs_of_files, summary_report

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


def refresh_gold(
    lakehouse: Lakehouse,
    config: Config,
    run_ids: list[str] | None = None,
    progress: Progress | None = None,
    ingested: Ingested | None = None,
) -> list[str]:
    """Recompute changed runs, rebuild the infrastructure timeline, rank the findings' causes
    (every finding's, or only the recomputed runs' when nothing else can have changed them).

    Each of the three is skipped when its inputs did not change. ingested: what this job has
    just taken in (its stages then know their inputs changed without comparing versions).
    """
    ingested = ingested or Ingested()
    if (
        run_ids is None
        and not ingested.any()
        and lakehouse.stage_is_current("gold", gold_inputs(lakehouse, config))
    ):
        log.info("gold: no input changed since the last analyze, nothing to recompute")
        return []

    # before the pipeline replaces any finding: were every finding's causes current?
    before = CausesBefore.seen(lakehouse, config)

    def pipeline() -> list[str]:
        with stage("pipeline", progress):
            scope = list(ingested.runs) if ingested.runs is not None else None
            return run_pipeline(lakehouse, config, run_ids, progress, scope)

    def timeline() -> bool:
        with stage("infrastructure timeline", progress):
            return refresh_infra_events(lakehouse, changed=ingested.infrastructure)

    # silver and gold of the runs, and the timeline of the logs, come from different tables
    recomputed, rebuilt = side_by_side(pipeline, timeline)
    # what the correlation does not change is complete: committed while it runs
    lakehouse.commit_behind([t for t in lakehouse.pending() if t not in CAUSE_OUTPUTS])
    with stage("causes", progress):
        current = before.current and before.alone_since(lakehouse)
        runs = causes_scope(current, rebuilt, recomputed)
        changed = bool(recomputed) or rebuilt
        refresh_causes(lakehouse, config, changed=changed, runs=runs, before=before)
    lakehouse.record_stage("gold", lambda: gold_inputs(lakehouse, config))
    return recomputed


@dataclass(frozen=True)
class Ingested:
    """Whether a job has just taken in new trace files, and new logs or ZooKeeper captures."""

    traces: bool = False
    infrastructure: bool = False
    # the only runs whose bronze changed, when the job knows them (jobs/receipt.py `settled`)
    runs: tuple[str, ...] | None = None

    def any(self) -> bool:
        return self.traces or self.infrastructure


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
    """Ingest everything under `path`, recompute, and report the runs of `path`'s files.

    Returns the `analyze --json` object: {"ingest": {...}, "infra": {...}, "runs": [...],
    "outages": [...], "anomalies": [...], "why_unknown": [...], "other_runs": N,
    "quarantine": {...}}: the runs whose trace files are under `path` (ingested now or
    earlier), their outages and findings, and how many other runs the lakehouse holds; outages
    and anomalies carry their causes; "quarantine" counts the quarantined records of the files
    under `path` (of this ingest or an earlier one). When
    alert sinks are configured, new alerts are raised and sent, and "alerts" says how it went;
    when logs were ingested, "recognized" says per source how many entries a pattern knew.

    On a local lakehouse, for an input of about one ingest batch, the job's writes are
    deferred (pulsar_audit/deferred.py): every stage reads what the stages before it wrote
    from memory, and each table is committed once; the job holds the ingest lock throughout.
    """
    precheck_local(str(path))  # a folder without inputs: list_inputs says so
    is_folder, inputs = list_inputs(lakehouse, path)
    with stage("create tables", progress):
        lakehouse.create_all()
    if not defers(lakehouse, local_input_bytes(str(path))):
        start = receipt.job_start(config)
        return _analyze(lakehouse, config, path, is_folder, inputs, progress, start)
    job = DeferredLakehouse(lakehouse)
    try:
        with lakehouse.exclusive("ingest"):
            start = receipt.job_start(config)
            settled = (
                is_folder
                and start is not None
                and receipt.settled(config, start)
                and not _seen_before(job, inputs)
            )
            return _analyze(job, config, path, is_folder, inputs, progress, start, settled)
    finally:
        job.release()


def _analyze(
    lakehouse: Lakehouse,
    config: Config,
    path: str | Path,
    is_folder: bool,
    inputs: Inputs,
    progress: Progress | None,
    start: receipt.JobStart | None = None,
    settled: bool = False,
) -> dict[str, Any]:
    """start: the job's start (`receipt.job_start`), for the receipt it writes.
    settled: every run the lakehouse holds is checked and computed, and no trace file under
    `path` was ingested before (`_seen_before`): the runs this job takes in are the only ones
    its checks and pipeline need to look at."""
    report, infra = ingest_inputs(lakehouse, path, is_folder, inputs, progress, settled=settled)
    lakehouse.commit_behind(lakehouse.pending())  # bronze is complete: committed meanwhile
    ingested = Ingested(
        traces=report["files"] > 0,
        infrastructure=infra["log_files"] + infra["zk_files"] > 0,
        runs=tuple(report["runs"]) if settled else None,
    )
    refresh_gold(lakehouse, config, progress=progress, ingested=ingested)

    def summary() -> dict[str, Any]:
        with stage("summary", progress):
            files = _input_paths(lakehouse, path, is_folder, inputs)
            runs = runs_of_files(lakehouse, files)
            found = summary_report(lakehouse, runs)
            found["other_runs"] = other_run_count(lakehouse, runs)
            found["quarantine"] = quarantined_in(lakehouse, files)
        if infra["log_files"]:  # what the patterns understood of PATH's logs just taken in
            with stage("log recognition", progress):
                logs = [f.path for files in inputs.logs.values() for f in files]
                found["recognized"] = recognized_by_source(lakehouse, files=logs)
        return found

    deferred = isinstance(lakehouse, DeferredLakehouse)
    keeps_receipt = receipt.applies(config)
    if deferred:
        # the summary is read from what the job wrote, while it is committed
        _, found = side_by_side(lambda: _commit(lakehouse, progress), summary)
        alone = lakehouse.committed_alone()
    else:
        before = lakehouse.versions(TABLES) if keeps_receipt else None
        found = summary()
    result = {"ingest": {k: report[k] for k in INGEST_FIELDS}, "infra": infra, **found}
    if config.alerts.sinks:
        with stage("alerts", progress):
            # sent only once committed, through the plain lakehouse: a send is never deferred
            plain = Lakehouse(lakehouse.spark, lakehouse.config) if deferred else lakehouse
            result["alerts"] = raise_and_send(plain, config)
    # Nothing else wrote while the result was read back: a rerun may answer from it.
    if keeps_receipt:
        now = lakehouse.versions(TABLES)
        if (alone and not config.alerts.sinks) if deferred else now == before:
            listed = inputs.local_paths() if is_folder else None
            settles = (
                deferred
                and start is not None
                and start.alone_on_bookkeeping(now, lakehouse.commit_counts(receipt.BOOKKEEPING))
            )
            receipt.write_receipt(config, path, now, result, listed, start, settles)
    return result


def _seen_before(lakehouse: Lakehouse, inputs: Inputs) -> bool:
    """Whether the manifest may hold one of the trace files listed (by its files' statistics,
    without Spark): a file ingested again replaces rows of runs it may no longer hold."""
    paths = [f.path for f in inputs.traces]
    return bool(paths) and lakehouse.may_hold("ingested_files", [{"path": paths}])


def _input_paths(
    lakehouse: Lakehouse, path: str | Path, is_folder: bool, inputs: Inputs
) -> list[str]:
    """The identity paths of the traces and ZooKeeper captures under `path` (or of the file)."""
    if not is_folder:  # a single file is a trace
        return [FileStore(lakehouse.spark).status(str(path)).path]
    return [f.path for f in (*inputs.traces, *inputs.zk)]


def _commit(lakehouse: DeferredLakehouse, progress: Progress | None) -> None:
    with stage("commit", progress):
        lakehouse.commit()


def analyze_path(ctx: Context, path: str | Path) -> dict[str, Any]:
    """`analyze` for a command's context (config and lakehouse already chosen), in the
    session its input calls for (`Context.sized_for`: the small-input session for a small
    local input when Spark is not started yet; a running session's, e.g. the warm server's,
    with the input's settings for this job only)."""
    with ctx.sized_for(str(path)):
        return analyze(ctx.lakehouse, ctx.config, path, ctx.progress())
