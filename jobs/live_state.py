"""One `watch` micro-batch on streaming state (issue 29): the batch's events, ingested by the
same rules as `analyze`'s, are folded into the live state (silver.live_state, its parts:
pipelines/live_state.py) and the provisional findings are judged from that state and the
batch's own events, without re-judging the runs: their full pipeline runs only when a run
ends or the watch leaves (jobs/live.py).

Read → fold → write the state whole, one overwrite (through the micro-batch's deferred
lakehouse, one commit beside bronze's manifest, pulsar_audit/deferred.py) → the findings,
collected (a short list: findings, not messages) for jobs/live.py to open and settle once
committed. The state's parts, the closed outages, the findings, the ended runs and the
per-run rates of the micro-batch's events (for the live view) come from one packed
checkpoint (pulsar_audit/packed.py): one Spark job computes them, one collect brings the
small ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import live
from pipelines.live_state import (
    STATE_TABLES,
    Folded,
    LiveState,
    ended,
    fold,
    new_subscriptions,
    parts_of,
    seen_in,
    state_part,
)
from pipelines.silver import build_delivery, resolve_receives
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.delta_log import log_version
from pulsar_audit.kept_rows import KeptRows
from pulsar_audit.local_frames import local_frame
from pulsar_audit.packed import collected, pack, packed
from pulsar_audit.schemas import OUTAGES, PROVISIONAL, RUN_EVENTS
from pulsar_audit.spark import checkpointed, release, side_by_side, without_estimate
from serve.live_view import batch_rates

log = logging.getLogger(__name__)

SETTLED = ["state", "closed_batch", "closed_at", "duration_ms", "resolved_by"]
# the small parts of a micro-batch's packed fold (beside the state's parts)
CLOSED, FOUND, ENDED, RATES = "closed_outages", "found", "ended_runs", "rates"


@dataclass
class Judged:
    """What a micro-batch's fold found: its runs, those whose every consumer ended, the
    provisional findings it shows (PROVISIONAL rows, open), the outages it closed, and per
    run the sends and deliveries of its events (serve.live_view.batch_rates rows)."""

    runs: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    found: list[Row] = field(default_factory=list)
    closed: list[Row] = field(default_factory=list)
    rates: list[Row] = field(default_factory=list)
    # the live state's rows the micro-batch wrote (a checkpoint the caller keeps or releases)
    state_rows: DataFrame | None = None


@dataclass
class KeptState:
    """silver.live_state as this watch process last wrote it: its rows (a checkpoint) and the
    table's version its commit made. While the table is still at that version (no other
    writer since: its log says so, without Spark), the rows are the table, read from memory
    instead of from a version whose Delta snapshot would be built anew (a Spark job and
    planning, twice per micro-batch). A new process, another writer or a table not in a local
    path: read from Delta."""

    rows: DataFrame | None = None
    version: int | None = None

    def table(self, lakehouse: Lakehouse) -> DataFrame | None:
        """The table's rows, when what is kept is still the table; else None."""
        if self.rows is None or self.version is None or lakehouse.config.storage != "path":
            return None
        if log_version(Path(lakehouse.location("live_state"))) != self.version:
            return None
        return self.rows

    def committed(self, lakehouse: Lakehouse, rows: DataFrame) -> None:
        """`rows` are committed (the commit that wrote them has returned; called under the
        lakehouse's ingest lock, which other writers of the state take too, so that the
        version read is the one that commit made)."""
        self.release()
        if lakehouse.config.storage == "path":
            # the next fold builds from it: without the estimate of the fold that made it
            try:
                self.rows = without_estimate(rows)
            except BaseException:
                release(rows)
                raise
            self.version = log_version(Path(lakehouse.location("live_state")))
        else:
            release(rows)

    def release(self) -> None:
        if self.rows is not None:
            release(self.rows)
        self.rows, self.version = None, None


def read_state(
    lakehouse: Lakehouse,
    keep: Callable[[DataFrame], DataFrame] = lambda df: df,
    kept: KeptState | None = None,
) -> LiveState:
    """The live state as it is (every run's: what is open is small). keep: applied to the
    table as read, before its parts are unpacked from it (a checkpoint: one read for all).
    kept: the state this process last wrote (read from memory while it is the table)."""
    return LiveState.of(_state_table(lakehouse, kept, keep))


def carry_over_state(lakehouse: Lakehouse) -> bool:
    """A watch of a version before session 33 kept its live state in six tables, one per
    part (schemas.RETIRED_TABLES): carried into silver.live_state (one commit) when that was
    never written and any of them exists, so that a watch restarted on a newer version goes on
    from the state it left. Whether it did. The old tables are left as they are (a
    live_state emptied later does not take them again)."""
    if not any(lakehouse.exists(part) for part in STATE_TABLES):
        return False
    if lakehouse.written("live_state"):
        return False
    # an older contract's missing columns read as null (Lakehouse.read), conformed by `of`
    older = pack({part: lakehouse.read(part) for part in STATE_TABLES})
    lakehouse.overwrite("live_state", LiveState.of(older).as_table())
    log.info("carried the live state of %s into live_state", ", ".join(STATE_TABLES))
    return True


def already_folded(state: LiveState, runs: list[str], batch_id: int) -> bool:
    """Whether micro-batch `batch_id` is in the state already (replayed after a crash)."""
    row = (
        state.runs.filter(F.col("run_id").isin(runs))
        .agg(F.max("folded_batch").alias("last"))
        .first()
    )
    return row is not None and row["last"] is not None and row["last"] >= batch_id


def fold_batch(
    lakehouse: Lakehouse,
    config: Config,
    files: list[str],
    runs: list[str],
    batch_id: int,
    replayable: bool = True,
    kept_state: KeptState | None = None,
    run_configs: KeptRows | None = None,
) -> Judged:
    """Fold the bronze rows of `files` (the micro-batch's, of `runs`) into the live state,
    write it, and judge `runs` from it.

    replayable: whether the micro-batch may be in the state already (the first one a watch
    process runs: a replay after a crash); a later one is not looked up.
    kept_state: the state this process last wrote (`KeptState`); the rows this micro-batch
    writes are returned in `Judged.state_rows`, for the caller to keep once committed.
    run_configs: bronze.run_events' committed rows as this process last read them
    (`kept_run_configs`: most micro-batches bring no run event, so the table stays as read).

    What several parts of the state and the findings share (the batch's rows and deliveries,
    the per-message aggregate, the in-flight changes, the consumers) is computed once into a
    checkpoint; the new state, the outages closed, the findings, the ended runs and the rates
    are then computed together into one (pulsar_audit/packed.py): the state's parts are written from
    it in one overwrite of silver.live_state, and the small parts come to the driver in one
    collect."""
    if not runs:
        return Judged()
    kept: list[DataFrame] = []

    def keep(df: DataFrame) -> DataFrame:
        kept.append(checkpointed(df))
        return kept[-1]

    try:
        of_files = F.col("source_file").isin(files)

        def own_rows(table: str) -> DataFrame:
            """The micro-batch's rows of `table`: from its ingest's pending writes when they
            hold them all (in memory already: not kept again), else read once from Delta."""
            match = {"source_file": files}
            rows = lakehouse.read_matching(table, match)
            return rows if lakehouse.held_in_memory(table, match) else keep(rows)

        producer = own_rows("producer_events")
        consumer = own_rows("consumer_events")
        # read once: every part is unpacked from it, some several times over (a Delta scan
        # each, with its own search for files, otherwise)
        state = read_state(lakehouse, keep, kept_state)
        replayed = replayable and already_folded(state, runs, batch_id)
        # independent steps, each a Spark job or two and its planning: side by side, on the
        # second core the chain of the fold otherwise leaves idle
        delivery, earlier, configs = side_by_side(
            lambda: keep(build_delivery(resolve_receives(consumer, producer))),
            lambda: None if replayed else _earlier(lakehouse, state, consumer, of_files),
            lambda: _run_configs(lakehouse, runs, files, run_configs or kept_run_configs()),
        )
        parts: dict[str, DataFrame] = {}

        def seen() -> DataFrame:  # the batch detectors', on the micro-batch's own events
            return keep(live.seen_as_they_are(seen_in(producer, consumer, delivery, configs)))

        if replayed:
            log.info("micro-batch %d is in the live state already: not folded again", batch_id)
            seen_rows = seen()
        else:

            def keep_each(builds: list[Callable[[], DataFrame]]) -> list[DataFrame]:
                return side_by_side(*[lambda build=build: keep(build()) for build in builds])

            def folded_state() -> Folded:
                return fold(
                    state,
                    producer,
                    delivery,
                    consumer,
                    config.pipeline,
                    batch_id,
                    keep,
                    earlier,
                    keep_each,
                )

            folded, seen_rows = side_by_side(folded_state, seen)
            state = folded.state
            parts = {**state.tables(), CLOSED: folded.closed_outages}
        found = _found(state, config, runs, seen_rows)
        parts[FOUND] = live.opened(found, batch_id)
        parts[ENDED] = live.ended_runs(ended(state.consumers.filter(F.col("run_id").isin(runs))))
        parts[RATES] = batch_rates(producer, consumer)  # what the live view shows of the batch
        kept.append(computed := packed(parts))
        small = collected(computed, [p for p in (CLOSED, FOUND, ENDED, RATES) if p in parts])
        rows = None
        if CLOSED in parts:  # folded: every part, in one commit
            rows = checkpointed(parts_of(computed, list(STATE_TABLES)))
            try:
                lakehouse.overwrite_computed("live_state", rows)
            except BaseException:
                release(rows)
                raise
        return Judged(
            runs=runs,
            ended=sorted(row["run_id"] for row in small[ENDED]),
            found=small[FOUND],  # findings, not messages
            closed=small.get(CLOSED, []),  # outages: a short list
            rates=small[RATES],  # a row per run
            state_rows=rows,
        )
    finally:
        for df in kept:
            release(df)


RUN_CONFIG_COLUMNS = ("run_id", "event", "deduplication")  # what `seen_in` reads of run_events


def kept_run_configs() -> KeptRows:
    """bronze.run_events as `seen_in` needs it (the runs' configs: a few rows per run), kept
    while the table has not moved on."""
    return KeptRows("run_events", RUN_CONFIG_COLUMNS)


def _run_configs(
    lakehouse: Lakehouse, runs: list[str], files: list[str], kept: KeptRows
) -> DataFrame:
    """bronze.run_events' RUN_CONFIG_COLUMNS of `runs`: the committed rows (`kept`, read
    from the driver while the table stays at the version read) and the micro-batch's own
    (`files`': pending in a deferred lakehouse, committed already otherwise, then twice:
    `run_deduplication` takes any config row of a run alike)."""
    schema = T.StructType([RUN_EVENTS[c] for c in RUN_CONFIG_COLUMNS])
    committed = local_frame(lakehouse.spark, kept.of(lakehouse, runs), schema)
    own = lakehouse.read_matching("run_events", {"source_file": files})
    return committed.unionByName(own.select(*RUN_CONFIG_COLUMNS))


def _earlier(
    lakehouse: Lakehouse, state: LiveState, consumer: DataFrame, of_files: Column
) -> DataFrame | None:
    """The bronze producer rows, before this micro-batch's files, of the runs where the batch
    shows a subscription the state does not know (`fold`'s `earlier`); None when it shows
    none (the usual micro-batch: one small job to know it, no read of bronze)."""
    runs = sorted({row["run_id"] for row in new_subscriptions(state.consumers, consumer).collect()})
    if not runs:  # subscriptions: a short list
        return None
    return lakehouse.read("producer_events").filter(F.col("run_id").isin(runs) & ~of_files)


def _found(state: LiveState, config: Config, runs: list[str], seen: DataFrame) -> DataFrame:
    """The provisional findings `runs` show: from the state, and `seen`, what the batch
    detectors see in the micro-batch's own events (`pipelines.live.seen_as_they_are`)."""
    clock = state.runs.filter(F.col("run_id").isin(runs)).select("run_id", "now")
    losses = live.suspected_losses(state.awaiting, clock, config.pipeline.suspected_loss_ms)
    outages = live.outages_in_progress(state.streams, clock, config.pipeline.backoff_ladder_ms[0])
    return losses.unionByName(outages).unionByName(seen)


def judge(
    lakehouse: Lakehouse,
    judged: Judged,
    batch_id: int,
    kept_state: KeptState | None = None,
    findings: KeptRows | None = None,
) -> list[Row]:
    """Open the provisional findings a micro-batch's fold shows, and settle those of its runs
    still going from the live state: an outage is confirmed by the stretch the batch closed,
    a suspected loss withdrawn once no awaited message of it is missing any more. An outage
    the batch closed that was never seen in progress (it began and ended between two looks)
    is recorded confirmed at once, so that it is raised too. kept_state: as `fold_batch`'s.
    findings: gold.provisional's rows as this process last read them (`kept_findings`), read
    again only when the table has moved on.

    The runs' provisional rows are read once (findings, not messages: a short list) and
    judged from memory; returned with the rows this opened (the settled columns as read: an
    alert is raised on what a finding is, not on its state)."""
    spark = lakehouse.spark
    rows = (findings or kept_findings()).of(lakehouse, judged.runs)
    known = {row["finding_id"] for row in rows}
    new = [row for row in judged.found if row["finding_id"] not in known]
    if new:  # findings, not messages: a short list
        lakehouse.insert_new("provisional", local_frame(spark, new, PROVISIONAL))
        rows += new
    closed = local_frame(spark, judged.closed, OUTAGES)
    if judged.closed:  # outages: a short list; those never seen in progress, confirmed as seen
        unseen = live.seen_closed(closed, local_frame(spark, rows, PROVISIONAL), batch_id)
        unseen_rows = unseen.select(*PROVISIONAL.fieldNames()).collect()
        if unseen_rows:
            lakehouse.insert_new("provisional", local_frame(spark, unseen_rows, PROVISIONAL))
            rows += unseen_rows
    going = [run for run in judged.runs if run not in judged.ended]
    if not any(row["state"] == live.OPEN and row["run_id"] in going for row in rows):
        return rows  # nothing open to settle (a run without findings: no Spark job)
    of_going = F.col("run_id").isin(going)
    updates = live.resolved(
        local_frame(spark, rows, PROVISIONAL).filter(of_going),
        live.batch_findings(lakehouse.read("anomalies").limit(0), closed),
        live.awaited(
            state_part(_state_table(lakehouse, kept_state), "live_awaiting").filter(of_going)
        ),
        F.lit(False),
        batch_id,
    ).collect()
    record_settled(lakehouse, updates)
    return rows


def kept_findings() -> KeptRows:
    """gold.provisional's rows as a watch reads them again and again: in PROVISIONAL's order,
    kept while the table has not moved on (findings: a short list)."""
    return KeptRows("provisional", tuple(PROVISIONAL.fieldNames()))


def provisional_of(lakehouse: Lakehouse, runs: list[str]) -> list[Row]:
    """gold.provisional's rows of `runs`, in PROVISIONAL's order (findings: a short list)."""
    return kept_findings().of(lakehouse, runs)


def _state_table(
    lakehouse: Lakehouse,
    kept: KeptState | None,
    keep: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> DataFrame:
    """silver.live_state's rows: those `kept` while they are the table, else the table as
    read (then `keep` applied)."""
    table = kept.table(lakehouse) if kept is not None else None
    return table if table is not None else keep(lakehouse.read("live_state"))


def record_settled(lakehouse: Lakehouse, updates: list[Row]) -> None:
    """Write `pipelines.live.resolved` rows into gold.provisional."""
    if updates:  # findings: a short list
        schema = T.StructType([PROVISIONAL[c] for c in ("finding_id", *SETTLED)])
        frame = local_frame(lakehouse.spark, updates, schema)
        lakehouse.update_changed("provisional", frame, SETTLED)
