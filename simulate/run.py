"""`simulate run`: plan → per-message truth (Spark) → trace files, logs, ZooKeeper, truth.json."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_audit.kinds import ANOMALY_KINDS, PRODUCER_KINDS
from pulsar_audit.local_frames import local_frame
from simulate import consumers as C
from simulate import truth as T
from simulate.causes import cause_of
from simulate.infra import write_infra
from simulate.messages import build_messages
from simulate.plan import Plan, build_plan
from simulate.scenario import Scenario, validate
from simulate.story import tell
from simulate.trace import (
    consumer_lines,
    end_event,
    producer_lines,
    producer_name,
    run_events,
    subscribe_event,
    write_trace,
)
from simulate.truth_keys import type_labels

log = logging.getLogger(__name__)
TRUTH_FILE = "truth.json"
# A small run computes its messages, stored copies and each consumer's deliveries once and
# keeps them (a local checkpoint): every consumer, the labels, the trace and the counts read
# them again, and without it each of the run's 20-35 Spark jobs re-plans and recomputes the
# whole lineage, which is most of a small run's CPU (docs/performance.md, "Session 20":
# measured on the agreement suite's 1,000-message runs; the sweeps' are 500). A larger run
# recomputes them from the plan (closed-form, cheap per row) rather than hold them.
KEEP_UP_TO = 10_000
DEFAULT_LADDER = [100, 300, 700, 1500, 3100, 6300, 12700, 25500]
# Infrastructure event types (pipelines/log_patterns.py, zk_events.py) the simulated logs hold
# for a finding: `analyze` should name at least one of them among its causes.
OUTAGE_EVENTS = {
    "unload": [
        "bundle_unload_requested",
        "bundle_unload_started",
        "topic_unloading",
        "client_reconnect_scheduled",
    ],
    "kill-broker": ["client_reconnect_scheduled"],
    "isolate-broker-from-zk": ["zk_session_lost", "broker_shutdown", "client_reconnect_scheduled"],
}


def simulate_run(
    spark: SparkSession,
    scenario: Scenario,
    out: str | Path,
    threshold_ms: int = 100,
    ladder: list[int] | None = None,
    gzip: bool = True,
    columnar: bool = False,
    stuck_key_ms: int = 10_000,
    written: list[str] | None = None,
    after_trace: Callable[[list[Path]], None] | None = None,
) -> dict[str, Any]:
    """Write one run's trace files and truth.json under `out`; return the truth (a dict).

    threshold_ms, ladder, stuck_key_ms: the outage threshold, backoff ladder and stuck-key
    delay `analyze` will use; gzip: the trace files as `.jsonl.gz` (default) or plain
    `.jsonl`; columnar: as `.parquet`.
    written: the names of this run's trace files, already in `out` (an earlier simulation
    with the same options wrote them and was stopped before its truth): not written again.
    after_trace: called with the trace files once they are written, before the truth (whose
    computation takes longer than the files' at 10^8).
    """
    s = validate(scenario)
    ladder = ladder or DEFAULT_LADDER
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    plan = C.with_bookies_return(build_plan(s))
    keep = _keeper(s)
    messages = keep(build_messages(spark, plan))
    copies = keep(C.stored_copies(messages))
    found = C.consumers(plan)
    stop_rows = [r.asDict() for r in C.block_positions(copies, plan, found).collect()]
    lines, small = producer_lines(messages, plan), run_events(plan)
    labels, received, info = None, None, []
    redispatched: dict[str, set[tuple[int, int]]] = {}
    for n, consumer in enumerate(found):
        stops = local_frame(
            spark,
            [(r["stream"], r[f"stop_{n}"], r[f"crash_{n}"], r[f"join_{n}"]) for r in stop_rows],
            "stream long, stop_pos long, crash_pos long, join_pos long",
        )
        ended = consumer.stop_fraction == 0 and all(
            r[f"stop_{n}"] >= r["stored"] for r in stop_rows
        )
        delivered = keep(C.deliveries(copies, plan, consumer, stops))
        lines = lines.unionByName(consumer_lines(delivered, plan, consumer, n))
        if ended:
            small.extend(end_event(plan, consumer, n, client) for client in consumer.members)
        subscribed = consumer.mode == "single"
        if subscribed:
            small.append(subscribe_event(plan, consumer, n))
        these = T.labels(messages, delivered, consumer.subscription, ended)
        start_us = C.read_start_us(plan, n)
        typed = type_labels(messages, delivered, consumer, plan, start_us, stuck_key_ms)
        if typed is not None:
            these = these.unionByName(typed)
            redispatched[consumer.subscription] = T.redispatched(delivered)
        if consumer.skip_unreadable:
            hole = C.is_unreadable(
                plan, consumer.bookies_down, F.struct(*[F.col(c) for c in copies.columns])
            )
            these = these.unionByName(T.poll_skips(copies, delivered, hole, consumer.subscription))
        got = T.received(delivered, consumer.subscription)
        labels = these if labels is None else labels.unionByName(these)
        received = got if received is None else received.unionByName(got)
        stopped = {r["stream"]: r[f"stop_{n}"] for r in stop_rows}
        left_at = {r["stream"]: r[f"crash_{n}"] for r in stop_rows}  # storage positions
        info.append(
            {
                "name": consumer.name,
                "subscription": consumer.subscription,
                "clients": list(consumer.members),
                "bookies_down": list(consumer.bookies_down),
                "ended": ended,
                "stopped_at": stopped,
                "subscription_type": consumer.subscription_type,
                **({"left": consumer.leaves, "left_at": left_at} if consumer.leaves else {}),
                **_joined(consumer, {r["stream"]: r[f"join_{n}"] for r in stop_rows}),
                "visible": subscribed or ended or any(stopped.values()),
            }
        )
    labels = labels.unionByName(T.nonmonotonic_sends(messages))
    if written is None:
        files = write_trace(spark, lines, small, folder, s.run_id, gzip, columnar)
        if after_trace is not None:
            after_trace(files)
    else:
        files = [folder / name for name in written]
    story = tell(plan)
    infra_files = write_infra(plan, story.lines, story.zk, folder)
    totals = messages.agg(
        *[F.sum((F.col("outcome") == o).cast("long")).alias(o) for o in ("ack", "nack")]
    ).first()
    counts = {r["subscription"]: r["received"] for r in received.collect()}
    truth = {
        "format": "pulsar-audit simulate truth v1",
        "run_id": s.run_id,
        "topic": s.topic,
        "scenario": s.as_dict(),
        "config": f"{s.ensemble}-{s.write_quorum}-{s.ack_quorum}",
        "faults": plan.faults,
        "plan": plan.as_dict(),
        "consumers": info,
        "anomalies": _anomalies(plan, T.blocks(labels), found, info, redispatched),
        "outages": _outages(plan, T.outages(messages, plan, threshold_ms, ladder)),
        "outage_threshold_ms": threshold_ms,
        "backoff_ladder_ms": ladder,
        "files": [p.name for p in files],
        "infra_files": infra_files,
    }
    truth["runs"] = _runs(
        s, info, counts, truth["anomalies"], int(totals["ack"] or 0), int(totals["nack"] or 0)
    )
    truth["generate_s"] = round(time.monotonic() - started, 2)
    (folder / TRUTH_FILE).write_text(json.dumps(truth, indent=1, default=str) + "\n")
    return truth


def _keeper(s: Scenario) -> Callable[[DataFrame], DataFrame]:
    """How the run keeps a frame its later actions read again (see KEEP_UP_TO)."""
    if s.messages * s.streams > KEEP_UP_TO:
        return lambda frame: frame
    return lambda frame: frame.localCheckpoint()


def _anomalies(
    plan: Plan,
    found: list[dict],
    consumers: list[C.Consumer],
    info: list[dict],
    redispatched: dict[str, set[tuple[int, int]]],
) -> list[dict[str, Any]]:
    """Blocks with partition, producer and true cause; none for a consumer the trace cannot show.

    redispatched: per two-consumer subscription, the (stream, seq) a disconnect sent again."""
    partitioned = bool(plan.scenario.partitions)
    by_subscription = {c.subscription: c for c in consumers}
    visible = {c["subscription"] for c in info if c["visible"]}
    found = [b for b in found if b["subscription"] in visible or b["subscription"] is None]
    for block in found:
        stream = block.pop("stream")
        moved = redispatched.get(block["subscription"], set())
        low, high = block["seq_from"], block["seq_to"]
        block.update(
            partition=stream if partitioned else -1,
            producer=producer_name(stream, partitioned),
            cause=cause_of(
                plan,
                block["kind"],
                by_subscription.get(block["subscription"]),
                any(st == stream and low <= seq <= high for st, seq in moved),
            ),
        )
    return found


def _joined(consumer: C.Consumer, at: dict[int, int]) -> dict[str, Any]:
    """A Key_Shared subscription's joining consumer and where it joined (storage positions)."""
    if not consumer.join_fraction:
        return {}
    return {"joined": consumer.clients[-1], "joined_at": at}


def _outages(plan: Plan, found: list[dict]) -> list[dict[str, Any]]:
    partitioned = bool(plan.scenario.partitions)
    for outage in found:
        stream = outage.pop("stream")
        outage.update(
            partition=stream if partitioned else -1,
            producer=producer_name(stream, partitioned),
            cause={
                "fault": plan.faults[0],
                "reconnect": plan.reconnect,
                "events": OUTAGE_EVENTS.get(plan.faults[0]["action"], []),
            },
        )
    return found


def _runs(
    s: Scenario,
    info: list[dict],
    counts: dict[str, int],
    anomalies: list[dict],
    acked: int,
    nacked: int,
) -> list[dict[str, Any]]:
    """Expected `analyze --json` "runs" rows, one per subscription, sorted like the product.

    A consumer that received nothing and has no `end` left no line in the trace: no reader of
    the trace can know it existed, so it has no row (truth.json's "consumers" still lists it).
    """
    rows = []
    for run in (c for c in info if c["visible"]):
        row = {
            "run_id": s.run_id,
            "topic": s.topic,
            "subscription": run["subscription"],
            "sent": s.messages * s.streams,
            "acked": acked,
            "nacked": nacked,
            "received": int(counts.get(run["subscription"], 0)),
        }
        for kind in ANOMALY_KINDS:  # a producer's kinds count for every subscription
            everyones = kind in PRODUCER_KINDS
            row[kind] = sum(
                a["count"]
                for a in anomalies
                if a["kind"] == kind and (everyones or a["subscription"] == run["subscription"])
            )
        row["valid"] = T.valid(row, s.dedup, run["ended"])
        rows.append(row)
    return sorted(rows, key=lambda r: r["subscription"])
