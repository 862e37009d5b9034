"""`watch`: the main job while a run is still being written (issue 29).

A Spark Structured Streaming query over the landing folder notices each new input file once
(traces, logs, ZooKeeper captures; a file source, Auto Loader on Databricks:
jobs/live_source.py; its checkpoint remembers which files it has handed out). Each
micro-batch feeds its files through the ingest `analyze` runs — the checks' row rules
(jobs/ingest.py; a run's table-level checks judge it whole, once it has ended: at its
reconciliation) — folds their trace events into the live state and judges the runs it touched
from it (jobs/live_state.py) into gold.provisional; logs and captures rebuild
the infrastructure timeline, and the causes of the findings of the runs still watched are
ranked from it (pipelines/causes_job.py); then the new rows go to the alert sinks once each.
A run whose every consumer has ended is reconciled after the micro-batch that saw the end
has returned (jobs/live_reconcile.py): its table checks and full pipeline
(pipelines/runs_job.py), then each
provisional finding confirmed by a batch finding or withdrawn (a confirmed one takes that
finding's causes). On leaving (--once, --until-idle)
`analyze` runs on the folder and the ended runs are reconciled with its findings (all runs
with `final`).
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from ingest.inputs import classify
from jobs.analyze import analyze
from jobs.ingest import check_stale_runs, ingest_inputs
from jobs.live_reconcile import ended_runs, pending_runs, record_reconciled, settle
from jobs.live_source import input_files
from jobs.live_state import (
    Judged,
    KeptState,
    carry_over_state,
    fold_batch,
    judge,
    kept_findings,
    kept_run_configs,
    provisional_of,
)
from jobs.live_warm import (
    WarmedUp,
    has_input,
    scratch_config,
    sent_alerts,
    warms_up,
    write_warm_up_run,
)
from jobs.stages import Progress, stage
from pipelines.causes_job import attach_causes, attach_provisional_causes
from pipelines.infra_events import refresh_infra_events
from pipelines.runs_job import run_pipeline
from pulsar_audit.config import Config
from pulsar_audit.deferred import DeferredLakehouse, defers
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import NoInputError
from pulsar_audit.kept_rows import KeptRows
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import ALERTS, PROVISIONAL
from pulsar_audit.spark import SMALL_FRAMES_CONF, release, session_settings, side_by_side
from pulsar_audit.storage import FileStat, FileStore
from serve.alert_job import send_alerts
from serve.alerts import alerts_for_provisional
from serve.summary import runs_of_files

log = logging.getLogger(__name__)

# The tables whose contract grew since watches first wrote them (pulsar_audit/schemas.py):
# gold.provisional's causes. (The live state's parts, whose contracts grew in session 32, are
# one table since session 33: carried over from their old tables, `carry_over_state`.)
UPGRADED = ("provisional",)

# Called after each micro-batch with its id, its files' paths and what its fold judged (a live
# view, the lines a capture beside the watch prints).
AfterBatch = Callable[[int, list[str], Judged], None]
WARM_UP = "warm-up micro-batch"  # the stage name of a warm-up's micro-batches


@dataclass
class WatchOptions:
    """once: the files there now, then stop; until_idle_s: stop after this long without a
    new file; trigger_s: seconds between micro-batches; max_files: per micro-batch; final:
    on leaving, reconcile every run, ended or not; stop: once set, leave as soon as no
    micro-batch runs (e.g. set by a signal handler when the capture beside it has ended)."""

    checkpoint: str
    once: bool = False
    until_idle_s: float | None = None
    trigger_s: float = 2.0
    max_files: int = 100
    final: bool = False
    stop: threading.Event | None = None


@dataclass
class Watched:
    """What a watch did: micro-batches, files, the runs it judged."""

    batches: int = 0
    files: int = 0
    last_batch: int = -1
    runs: set[str] = field(default_factory=set)


def alert(
    lakehouse: Lakehouse,
    config: Config,
    runs: list[str],
    provisional: list[Row] | None = None,
    kept: KeptRows | None = None,
) -> dict[str, Any]:
    """Raise an alert per provisional finding of `runs` not raised yet, send what is pending.
    provisional: gold.provisional's rows of `runs` (`judge`'s: its findings as they are, their
    settled columns as read before it settled them; an alert does not show those), else read.
    kept: gold.alerts as this process last read it (read again once the table has moved on)."""
    if not config.alerts.sinks:
        return {}
    if provisional is None:
        provisional = provisional_of(lakehouse, runs)
    # alerts, findings: short lists
    alerts = [row.asDict(recursive=True) for row in (kept or KeptRows("alerts")).of(lakehouse)]
    raised = {a["finding_id"] for a in alerts if a["finding_id"] is not None}
    fresh = [row for row in provisional if row["finding_id"] not in raised]
    if fresh:
        new = alerts_for_provisional(local_frame(lakehouse.spark, fresh, PROVISIONAL)).collect()
        lakehouse.insert_new("alerts", local_frame(lakehouse.spark, new, ALERTS))
        alerts += [row.asDict(recursive=True) for row in new]
    return send_alerts(lakehouse, config, alerts)


class Watch:
    """One watch of a landing folder: the streaming query and what each micro-batch does."""

    def __init__(
        self,
        lakehouse: Lakehouse,
        config: Config,
        path: str | Path,
        options: WatchOptions,
        progress: Progress | None = None,
        after_batch: AfterBatch | None = None,
        label: str = "micro-batch",
    ):
        self.lakehouse, self.config, self.path = lakehouse, config, str(path)
        self.label = label  # its micro-batches' stage names: "<label> <id>: <n> file(s)"
        self.options, self.progress = options, progress
        self.after_batch = after_batch
        self.done = Watched()
        self.kept_state = KeptState()  # the live state this process last committed
        # gold.provisional and gold.alerts as this process last read them (while current)
        self.kept_findings, self.kept_alerts = kept_findings(), KeptRows("alerts")
        self.kept_run_configs = kept_run_configs()  # bronze.run_events, as the fold needs it
        self._busy = threading.Lock()
        self._last_active = time.monotonic()
        self._ended_seen = False

    def on_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: its files (one row each) through ingest, into the live state,
        judged; a run whose every consumer ended is only noted (its end is in the state it
        commits) and reconciled once the micro-batch has returned (`reconcile_pending`)."""
        with self._busy:
            store = FileStore(self.lakehouse.spark)
            files = [store.status(row["path"]) for row in batch.collect()]
            small = defers(self.lakehouse, sum(f.size_bytes for f in files))
            with (
                stage(f"{self.label} {batch_id}: {len(files)} file(s)", self.progress),
                session_settings(self.lakehouse.spark, SMALL_FRAMES_CONF if small else {}),
            ):
                if small:
                    # as analyze does for an input this small: each table committed once
                    job = DeferredLakehouse(self.lakehouse)
                    try:
                        with self.lakehouse.exclusive("ingest"):
                            judged, infra = self._take_in(job, files, batch_id)
                            self._commit(job, judged)
                    finally:
                        job.release()
                else:
                    self.kept_state.release()  # written as it was computed: read from Delta
                    judged, infra = self._take_in(self.lakehouse, files, batch_id)
                    release(judged.state_rows)
                # on what is committed: a finding or a send is never deferred
                provisional = None  # the runs' provisional rows, as judged
                if judged.runs:
                    with stage("provisional findings", self.progress):
                        provisional = judge(
                            self.lakehouse, judged, batch_id, self.kept_state, self.kept_findings
                        )
                if judged.runs or infra:  # new findings, or new events to explain them
                    with stage("causes", self.progress):
                        if attach_provisional_causes(self.lakehouse, self.config, batch_id):
                            provisional = None  # their causes may have changed: read again
                if judged.runs:
                    with stage("alerts", self.progress):
                        alert(
                            self.lakehouse, self.config, judged.runs, provisional, self.kept_alerts
                        )
            self.done.batches += 1
            self.done.files += len(files)
            self.done.last_batch = batch_id
            self.done.runs.update(judged.runs)
            self._ended_seen = self._ended_seen or bool(judged.ended)
            if self.after_batch:
                self.after_batch(batch_id, [f.path for f in files], judged)
            self._last_active = time.monotonic()

    def _commit(self, job: DeferredLakehouse, judged: Judged) -> None:
        """Commit a small micro-batch's writes; the live state it wrote is kept (under the
        ingest lock: the version kept is the one this commit made)."""
        with stage("commit", self.progress):
            try:
                job.commit()
            except BaseException:
                release(judged.state_rows)
                raise
        if judged.state_rows is not None:  # committed: the state as it now is
            self.kept_state.committed(self.lakehouse, judged.state_rows)

    def _take_in(
        self, lakehouse: Lakehouse, files: list[FileStat], batch_id: int
    ) -> tuple[Judged, bool]:
        """Ingest a micro-batch's files, fold their trace events into the live state, and
        bring the infrastructure timeline up to date when logs or ZooKeeper captures came;
        (what the fold judged, whether logs or captures came)."""
        root = FileStore(lakehouse.spark).normalize(self.path)
        inputs = classify(root, files, lambda f: f.path)
        # traces beside logs and captures, as analyze ingests them. The table checks judge a
        # run whole: over its whole bronze, growing with it, in every micro-batch that brings
        # its events, and wrongly while its clients' files land out of order (a receive whose
        # send is in a later file); so they wait for the run's reconciliation (and analyze)
        _, infra = ingest_inputs(lakehouse, self.path, True, inputs, self.progress, False)
        came = bool(inputs.logs or inputs.zk)
        if came:  # a replayed micro-batch's files are ingested already: compared, not assumed
            with stage("infrastructure timeline", self.progress):
                new = infra["log_files"] + infra["zk_files"] > 0
                refresh_infra_events(lakehouse, changed=new)
        # the batch's runs from the files' lineage: a batch replayed after a crash, whose
        # files are ingested already, judges them again
        paths = [f.path for f in inputs.traces]
        runs = runs_of_files(lakehouse, paths) if paths else []
        with stage("live state", self.progress):
            # only the first micro-batch a process runs can be a replay (a failed one ends it)
            replayable = self.done.batches == 0
            judged, _ = side_by_side(
                lambda: fold_batch(
                    lakehouse,
                    self.config,
                    paths,
                    runs,
                    batch_id,
                    replayable,
                    self.kept_state,
                    self.kept_run_configs,
                ),
                lambda: self._read_ahead(runs),
            )
            return judged, came

    def _read_ahead(self, runs: list[str]) -> None:
        """Beside the fold: gold.provisional's and gold.alerts' rows, as the micro-batch's
        judgement and alerts will read them, when the tables moved on since this process
        last read them (the last micro-batch's findings): read while the fold runs, not
        after it. Only a head start: a read that fails here is read again, and a table
        moved on meanwhile is read again too (`KeptRows`)."""
        if not runs:
            return
        try:
            self.kept_findings.of(self.lakehouse, runs)
            self.kept_alerts.of(self.lakehouse)
        except Exception:  # noqa: BLE001 - the judgement's own read reports it
            log.debug("reading ahead of the judgement failed", exc_info=True)

    def reconcile_pending(self) -> None:
        """Between micro-batches (none runs meanwhile): the runs the live state has ended
        since they were last reconciled get their table checks and full pipeline (analyze's),
        then every open finding of them confirmed by a batch finding or withdrawn, closed in
        the micro-batch that ended the run."""
        with self._busy:
            self._ended_seen = False
            pending = pending_runs(self.lakehouse)
            if not pending:
                return
            runs = sorted(pending)
            with stage(f"reconcile ended runs: {len(runs)}", self.progress):
                check_stale_runs(self.lakehouse, runs, self.progress)  # judged whole, at last
                run_pipeline(self.lakehouse, self.config, run_ids=runs, progress=self.progress)
                # the pipeline leaves causes empty: ranked as analyze ranks them, before the
                # confirmed findings take them
                attach_causes(self.lakehouse, self.config, runs)
                settle(self.lakehouse, pending, runs)
                record_reconciled(self.lakehouse, pending)

    def run(self) -> dict[str, Any]:
        """Watch until the files there now are done (once), the folder is idle, or forever;
        then, leaving, reconcile with `analyze` of the folder."""
        opts = self.options
        writer = (
            input_files(self.lakehouse, self.path, opts.max_files, self.config.watch.source)
            .writeStream.foreachBatch(self.on_batch)
            .option("checkpointLocation", opts.checkpoint)
            .queryName("pulsar-audit-watch")
        )
        self.reconcile_pending()  # a watch killed after a run's end was noted, before this
        if not opts.once:  # --once takes the files there now: none to wait for
            self.warm_up()
        if opts.once:
            query = writer.trigger(availableNow=True).start()
        else:
            query = writer.trigger(processingTime=f"{opts.trigger_s} seconds").start()
        try:
            if opts.once:  # leaving reconciles: its analyze runs every pipeline anyway
                query.awaitTermination()
            else:
                self._wait_idle(query, opts.until_idle_s)
        except KeyboardInterrupt:  # watching until interrupted: leaving is the way out
            log.info("watch interrupted after %d micro-batch(es)", self.done.batches)
        finally:
            query.stop()
            self.kept_state.release()
        return self.leave()

    def warm_up(self) -> WarmedUp | None:
        """Before the query starts, while the landing folder holds no input: this watch's
        micro-batches over a made-up run, in a scratch lakehouse (jobs/live_warm.py); None
        when it does not warm up. A warm-up that fails is logged and the watch goes on, cold."""
        if not warms_up(self.config) or has_input(self.path):
            return None
        started, done = time.monotonic(), WarmedUp()
        with tempfile.TemporaryDirectory(prefix="pulsar-audit-warm-up-") as scratch:
            root = Path(scratch)
            config = scratch_config(self.config, root)
            lakehouse = Lakehouse(self.lakehouse.spark, config)
            options = WatchOptions(checkpoint=str(root / "checkpoint"))
            scratch_watch = Watch(lakehouse, config, root / "landing", options, label=WARM_UP)
            try:
                lakehouse.create_all()
                for batch_id, files in enumerate(write_warm_up_run(root / "landing")):
                    if batch_id and has_input(self.path):  # the run has begun
                        break
                    rows = [(f"file:{file}",) for file in files]
                    paths = local_frame(lakehouse.spark, rows, "path string")
                    scratch_watch.on_batch(paths, batch_id)
                    done.batches += 1
                done.alerts = sent_alerts(root)
            except Exception:  # noqa: BLE001 - only a head start: the watch runs without it
                log.warning("the watch's warm-up failed; watching cold", exc_info=True)
            finally:
                scratch_watch.kept_state.release()
        done.seconds = time.monotonic() - started
        log.info("warmed up: %d micro-batch(es) in %.1f s", done.batches, done.seconds)
        return done

    def _wait_idle(self, query: Any, idle_s: float | None) -> None:  # noqa: ANN401 - StreamingQuery
        """Until the query stops, the stop event is set or, with `idle_s`, the folder has been
        idle that long; reconciling the runs a micro-batch has ended meanwhile."""
        stop = self.options.stop or threading.Event()
        while not query.awaitTermination(0.5):
            if self._ended_seen:
                self.reconcile_pending()
            with self._busy:  # never idle while a micro-batch runs
                if stop.is_set():
                    return
                if idle_s is not None and time.monotonic() - self._last_active >= idle_s:
                    return

    def leave(self) -> dict[str, Any]:
        """`analyze` the folder, reconcile its ended runs (every run when final), report."""
        try:
            with stage("analyze", self.progress):
                found = analyze(self.lakehouse, self.config, self.path, self.progress)
        except NoInputError:  # the folder holds no input yet (any other input error is raised)
            found = {"ingest": {}, "runs": []}
        pending = pending_runs(self.lakehouse)
        runs = sorted({r["run_id"] for r in found["runs"]} | self.done.runs | set(pending))
        reconciled = runs if self.options.final else ended_runs(self.lakehouse, runs)
        # a run the live state ended is closed in the micro-batch that ended it
        closing = {r: pending.get(r, self.done.last_batch) for r in runs}
        settle(self.lakehouse, closing, reconciled)
        # a run settled whole here is no longer watched (its findings keep analyze's causes)
        record_reconciled(self.lakehouse, {r: closing[r] for r in reconciled})
        sent = alert(self.lakehouse, self.config, runs) if runs else {}
        return {
            "batches": self.done.batches,
            "files": self.done.files,
            "runs": runs,
            "provisional": provisional_rows(self.lakehouse, runs),
            "alerts": sent,
            "analyze": {"ingest": found["ingest"], "valid": _verdicts(found)},
        }


def _verdicts(found: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: r.get(k) for k in ("run_id", "subscription", "valid")} for r in found["runs"]]


def provisional_rows(lakehouse: Lakehouse, runs: list[str]) -> list[dict[str, Any]]:
    """gold.provisional of `runs` (findings: a short list), in the order they were seen."""
    rows = (
        lakehouse.read("provisional")
        .filter(F.col("run_id").isin(runs))
        .orderBy("first_seen_batch", "kind", "seq_from", "started_at")
        .collect()
    )
    return [row.asDict() for row in rows]


def watch(
    lakehouse: Lakehouse,
    config: Config,
    path: str | Path,
    options: WatchOptions,
    progress: Progress | None = None,
    after_batch: AfterBatch | None = None,
) -> dict[str, Any]:
    """`pulsar-audit watch PATH`: see the module's docstring."""
    lakehouse.create_all()
    lakehouse.upgrade(UPGRADED)  # a lakehouse a watch of an older contract wrote
    carry_over_state(lakehouse)  # ... or of the live state's six tables
    return Watch(lakehouse, config, path, options, progress, after_batch).run()
