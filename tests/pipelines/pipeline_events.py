"""Tiny literal bronze events for pipeline tests: one function per trace event.

A module's traces are `Cases`, built as the runs of one pipeline build (the product analyzes
many runs at once, each run judged from its own events alone): the build's fixed cost, plan
construction and some sixty tiny Spark jobs, is then paid once per module, not once per test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines.build import (
    Bronze,
    Silver,
    build_findings,
    build_summary,
    shared_frames,
)
from pipelines.detectors import typed_checks
from pipelines.live_state import STATE_TABLES, Folded, LiveState, fold
from pipelines.silver import build_delivery, build_message_history, resolve_receives
from pulsar_audit.config import PipelineConfig
from pulsar_audit.packed import packed, unpacked
from pulsar_audit.schemas import CHECK_RESULTS, CONSUMER_EVENTS, PRODUCER_EVENTS, RUN_EVENTS

T0 = datetime(2025, 3, 4, 10, 0, 0)
PIPELINE = PipelineConfig(
    outage_threshold_ms=100, backoff_ladder_ms=[100, 300, 700, 1500, 3100, 6300, 12700, 25500]
)
_ROLE = {
    "send": "p",
    "ack": "p",
    "nack": "p",
    "receive": "c",
    "subscribe": "c",
    "end": "c",
    "config": "r",
}
_CLOSED = "closed_outages"  # the closed outages' part of a packed fold


def at(ms: float) -> datetime:
    """The trace's clock: `ms` milliseconds after T0."""
    return T0 + timedelta(milliseconds=ms)


def _event(event: str, ms: float, **fields: Any) -> dict[str, Any]:
    base = {"run_id": "r1", "topic": "t", "partition": -1, "event": event, "ts": at(ms)}
    return {**base, **fields}


def send(seq: int, ms: float, producer: str = "p1", **kw: Any) -> dict[str, Any]:
    return _event("send", ms, client=producer, seq=seq, **kw)


def ack(seq: int, ms: float, ledger: int = 1, entry: int | None = None, **kw: Any) -> dict:
    kw.setdefault("client", kw.pop("producer", "p1"))
    entry = seq if entry is None else entry
    kw.setdefault("batch_index", -1)
    return _event("ack", ms, seq=seq, ledger_id=ledger, entry_id=entry, **kw)


def nack(seq: int, ms: float, producer: str = "p1", **kw: Any) -> dict[str, Any]:
    return _event("nack", ms, client=producer, seq=seq, error="TimeoutException", **kw)


def receive(
    seq: int,
    ms: float,
    ledger: int = 1,
    entry: int | None = None,
    consumer: str = "c1",
    subscription: str = "s1",
    **kw: Any,
) -> dict[str, Any]:
    kw.setdefault("producer", "p1")
    kw.setdefault("batch_index", -1)
    entry = seq if entry is None else entry
    return _event(
        "receive",
        ms,
        client=consumer,
        subscription=subscription,
        seq=seq,
        ledger_id=ledger,
        entry_id=entry,
        **kw,
    )


def subscribe(ms: float, consumer: str = "c1", subscription: str = "s1", **kw: Any) -> dict:
    return _event("subscribe", ms, client=consumer, subscription=subscription, **kw)


def end(ms: float, consumer: str = "c1", subscription: str | None = "s1", **kw: Any) -> dict:
    return _event("end", ms, client=consumer, subscription=subscription, **kw)


def config(deduplication: bool, **kw: Any) -> dict[str, Any]:
    return _event("config", 0, client="harness", deduplication=deduplication, **kw)


def failed_check(expectation: str, run_id: str = "r1") -> dict[str, Any]:
    return {
        "run_id": run_id,
        "table": "producer_events",
        "expectation": expectation,
        "level": "table",
        "success": False,
        "ingest_id": "i1",
        "checked_at": T0,
    }


def _frame(spark: SparkSession, rows: list[dict], schema, ingest_id: str) -> DataFrame:
    lineage = {"source_file": "trace.jsonl", "ingest_id": ingest_id, "ingested_at": T0}
    full = [
        tuple({**lineage, "line_number": i, **row}.get(f.name) for f in schema.fields)
        for i, row in enumerate(rows, start=1)
    ]
    return spark.createDataFrame(full, schema)


def bronze(
    spark: SparkSession, events: list[dict], checks: list[dict] = (), ingest_id: str = "i1"
) -> Bronze:
    """Split `events` by role into bronze tables; line_number follows list order."""
    by_role = {role: [e for e in events if _ROLE[e["event"]] == role] for role in "pcr"}
    return Bronze(
        _frame(spark, by_role["p"], PRODUCER_EVENTS, ingest_id),
        _frame(spark, by_role["c"], CONSUMER_EVENTS, ingest_id),
        _frame(spark, by_role["r"], RUN_EVENTS, ingest_id),
        spark.createDataFrame(
            [tuple(c.get(f.name) for f in CHECK_RESULTS.fields) for c in checks], CHECK_RESULTS
        ),
    )


@dataclass(frozen=True)
class Gold:
    anomalies: DataFrame
    outages: DataFrame
    run_summary: DataFrame


def build(spark: SparkSession, events: list[dict], checks: list[dict] = ()) -> tuple[Silver, Gold]:
    """Silver and gold of `events`, each stage materialized as the job does by writing it."""
    data = bronze(spark, events, checks)
    shared = shared_frames(data)
    delivery = build_delivery(shared.receives).localCheckpoint()
    history = build_message_history(data.producer_events, delivery).localCheckpoint()
    silver = Silver(history, delivery)
    checks = typed_checks(shared.subscriptions)  # as the job does: only the typed checks due
    anomalies, outages = (
        df.localCheckpoint() for df in build_findings(data, shared, silver, PIPELINE, checks)
    )
    gold = Gold(anomalies, outages, build_summary(data, shared, silver, anomalies, outages))
    return silver, gold


def of_run(silver: Silver, gold: Gold, run_id: str) -> tuple[Silver, Gold]:
    """Every silver and gold frame cut down to the rows of run `run_id`."""

    def run(df: DataFrame) -> DataFrame:
        return df.filter(F.col("run_id") == run_id)

    return (
        Silver(run(silver.message_history), run(silver.delivery)),
        Gold(run(gold.anomalies), run(gold.outages), run(gold.run_summary)),
    )


@dataclass(frozen=True)
class Runs:
    """Silver and gold of one build of several cases; `runs[name]` is one case's slice."""

    silver: Silver
    gold: Gold
    names: tuple[str, ...]

    def __getitem__(self, case: str | Callable[[], list[dict]]) -> tuple[Silver, Gold]:
        name = case if isinstance(case, str) else case.__name__
        if name not in self.names:
            raise KeyError(f"no case {name!r} in this build; cases: {', '.join(self.names)}")
        return of_run(self.silver, self.gold, name)


class Cases:
    """A module's literal traces, each under its own run_id (the case's name), built together.

    `add(name, events, checks)` or the decorator `@cases.case` (the function's name, its
    result the events) declare them; `build(spark)` runs the pipeline once over all of them.
    Each case's events keep their order, so line_number still rises within a run."""

    def __init__(self) -> None:
        self.events: dict[str, list[dict]] = {}
        self.checks: dict[str, list[dict]] = {}

    def add(self, name: str, events: list[dict], checks: list[dict] = ()) -> str:
        if name in self.events:
            raise ValueError(f"case {name!r} declared twice")
        self.events[name] = [{**e, "run_id": name} for e in events]
        self.checks[name] = [{**c, "run_id": name} for c in checks]
        return name

    def case(self, events: Callable[[], list[dict]]) -> Callable[[], list[dict]]:
        self.add(events.__name__, events())
        return events

    def build(self, spark: SparkSession) -> Runs:
        events = [e for run in self.events.values() for e in run]
        checks = [c for run in self.checks.values() for c in run]
        return Runs(*build(spark, events, checks), names=tuple(self.events))


def summary(gold: Gold) -> dict[str, dict[str, Any]]:
    """run_summary rows keyed by subscription (a test reads one run, e.g. `Runs[case]`, and one
    topic)."""
    rows = gold.run_summary.collect()
    if len({r["run_id"] for r in rows}) > 1:
        raise ValueError("summary of several runs: read one case's run (Runs[case])")
    return {r["subscription"]: r.asDict() for r in rows}


def anomalies(gold: Gold, *kinds: str) -> list[tuple]:
    """(subscription, partition, producer, kind, seq_from, seq_to, count), sorted."""
    rows = gold.anomalies.collect()
    got = [
        (r.subscription, r.partition, r.producer, r.kind, r.seq_from, r.seq_to, r["count"])
        for r in rows
        if not kinds or r.kind in kinds
    ]
    return sorted(got)


def folded(
    spark: SparkSession,
    state: LiveState,
    events: list[dict],
    batch_id: int,
    earlier: list[dict] = (),
) -> Folded:
    """`events` as one `watch` micro-batch folded into `state` (pipelines/live_state.py), the
    new state's frames and the closed outages computed by one job into one checkpoint, as the
    job writes them (jobs/live_state.py: `packed`). earlier: the events of the micro-batches
    before it (their producer rows are `fold`'s `earlier`, as the job reads them from bronze
    when a subscription is new)."""
    batch = bronze(spark, events, ingest_id=f"i{batch_id}")
    producer, consumer = batch.producer_events, batch.consumer_events
    delivery = build_delivery(resolve_receives(consumer, producer))
    before = bronze(spark, list(earlier), ingest_id="before").producer_events if earlier else None
    done = fold(state, producer, delivery, consumer, PIPELINE, batch_id, earlier=before)
    pack = packed({**done.state.tables(), _CLOSED: done.closed_outages})
    kept = LiveState(*(unpacked(pack, table) for table in STATE_TABLES))
    return Folded(kept, unpacked(pack, _CLOSED))


@dataclass(frozen=True)
class Folds:
    """The folds of several cases' micro-batches; `folds(batch_id, case)` is one case's slice
    of the fold after micro-batch `batch_id`."""

    after: tuple[Folded, ...]
    names: tuple[str, ...]

    def __call__(self, batch_id: int, case: str) -> Folded:
        if case not in self.names:
            raise KeyError(f"no case {case!r} in these folds; cases: {', '.join(self.names)}")

        def run(df: DataFrame) -> DataFrame:
            return df.filter(F.col("run_id") == case)

        done = self.after[batch_id]
        return Folded(LiveState(*map(run, done.state.frames())), run(done.closed_outages))


class MicroBatches:
    """A module's micro-batch sequences for the live fold, each case under its own run_id (the
    case's name), folded together: micro-batch i holds the i-th micro-batch of every case
    that has one (the state is keyed by run, as the watch folds the runs it is writing)."""

    def __init__(self) -> None:
        self.batches: dict[str, list[list[dict]]] = {}

    def add(self, name: str, *batches: list[dict]) -> str:
        if name in self.batches:
            raise ValueError(f"case {name!r} declared twice")
        self.batches[name] = [[{**e, "run_id": name} for e in batch] for batch in batches]
        return name

    def events(self, name: str) -> list[dict]:
        """Every event of case `name`, its micro-batches in order."""
        return [e for batch in self.batches[name] for e in batch]

    def fold(self, spark: SparkSession) -> Folds:
        state, after = LiveState.empty(spark), []
        for batch_id in range(max(len(batches) for batches in self.batches.values())):
            events = [e for b in self.batches.values() if batch_id < len(b) for e in b[batch_id]]
            earlier = [e for b in self.batches.values() for batch in b[:batch_id] for e in batch]
            after.append(folded(spark, state, events, batch_id, earlier))
            state = after[-1].state
        return Folds(tuple(after), names=tuple(self.batches))
