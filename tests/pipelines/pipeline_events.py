"""Tiny literal bronze events for pipeline tests: one function per trace event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from pipelines.build import (
    Bronze,
    Silver,
    build_findings,
    build_summary,
    shared_frames,
)
from pipelines.detectors import typed_checks
from pipelines.live_state import Folded, LiveState, fold
from pipelines.silver import build_delivery, build_message_history, resolve_receives
from pulsar_audit.config import PipelineConfig
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


def summary(gold: Gold) -> dict[str, dict[str, Any]]:
    """run_summary rows keyed by subscription (tests use one run and one topic)."""
    return {r["subscription"]: r.asDict() for r in gold.run_summary.collect()}


def anomalies(gold: Gold, *kinds: str) -> list[tuple]:
    """(subscription, partition, producer, kind, seq_from, seq_to, count), sorted."""
    rows = gold.anomalies.collect()
    got = [
        (r.subscription, r.partition, r.producer, r.kind, r.seq_from, r.seq_to, r["count"])
        for r in rows
        if not kinds or r.kind in kinds
    ]
    return sorted(got)


def folded(spark: SparkSession, state: LiveState, events: list[dict], batch_id: int) -> Folded:
    """`events` as one `watch` micro-batch folded into `state` (pipelines/live_state.py), the
    new state's frames checkpointed as the job writes them."""
    batch = bronze(spark, events, ingest_id=f"i{batch_id}")
    producer, consumer = batch.producer_events, batch.consumer_events
    delivery = build_delivery(resolve_receives(consumer, producer))
    done = fold(state, producer, delivery, consumer, PIPELINE, batch_id)
    kept = LiveState(*(df.localCheckpoint() for df in done.state.frames()))
    return Folded(kept, done.closed_outages.localCheckpoint())
