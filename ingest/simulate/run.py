"""`simulate run`: plan → per-message truth (Spark) → trace files + truth.json (+ logs, ZooKeeper)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingest.simulate import consumers as C
from ingest.simulate import truth as T
from ingest.simulate.messages import build_messages
from ingest.simulate.plan import Plan, build_plan
from ingest.simulate.scenario import Scenario, validate
from ingest.simulate.trace import consumer_lines, end_event, producer_lines, producer_name, run_events, write_trace

log = logging.getLogger(__name__)
TRUTH_FILE = "truth.json"
DEFAULT_LADDER = [100, 300, 700, 1500, 3100, 6300, 12700, 25500]


def cause_of(plan: Plan, kind: str, consumer: C.Consumer) -> dict[str, Any]:
    """The true cause of an anomaly kind in this run (the protocol step that made it)."""
    s = plan.scenario
    fault = plan.faults[0] if plan.faults else {}
    texts = {
        "duplicated": f"{fault.get('action')} of {fault.get('target')}: the old owner persisted "
        "these entries but the client never saw their acks; it resent them to the new owner, "
        "which wrote them again (deduplication off)",
        "unacked_received": f"{fault.get('action')} of {fault.get('target')}: persisted by the "
        "old owner (recovery closed the ledger at its LAC) but the client's send timed out "
        "before it reconnected",
        "redelivered": f"{consumer.name} did not ack them in time; the broker redelivered them",
    }
    if kind in ("unseen", "lost"):
        if consumer.stop_fraction:
            text = f"{consumer.name} stopped after {consumer.stop_fraction:.0%} of the topic without end"
        else:
            text = (f"all Qw={s.write_quorum} bookies of a fragment ({', '.join(plan.killed)}) were "
                    f"down when {consumer.name} read: its acked entries are unreadable until they return "
                    "and the reader blocks there")
        return {"kind": "consumer" if consumer.stop_fraction else "bookies_down", "text": text,
                "bookies": [] if consumer.stop_fraction else plan.killed}
    return {"kind": kind, "text": texts.get(kind, ""), "fault": fault.get("action")}


def simulate_run(spark: SparkSession, scenario: Scenario, out: str | Path,
                 threshold_ms: int = 100, ladder: list[int] | None = None) -> dict[str, Any]:
    """Write one run's trace files and truth.json under `out`; return the truth (a dict).

    threshold_ms, ladder: the outage threshold and backoff ladder `analyze` will use.
    """
    s = validate(scenario)
    ladder = ladder or DEFAULT_LADDER
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    plan = build_plan(s)
    messages = build_messages(spark, plan)
    copies = C.stored_copies(messages)
    found = C.consumers(plan)
    stop_rows = [r.asDict() for r in C.block_positions(copies, plan, found).collect()]
    lines, small = producer_lines(messages, plan), run_events(plan)
    labels, received, info = None, None, []
    for n, consumer in enumerate(found):
        stops = spark.createDataFrame([(r["stream"], r[f"stop_{n}"]) for r in stop_rows],
                                      "stream long, stop_pos long")
        ended = consumer.stop_fraction == 0 and all(r[f"stop_{n}"] >= r["stored"] for r in stop_rows)
        delivered = C.deliveries(copies, plan, consumer, stops)
        lines = lines.unionByName(consumer_lines(delivered, plan, consumer, n))
        if ended:
            small.append(end_event(plan, consumer, n))
        these = T.labels(messages, delivered, consumer.subscription, ended)
        got = T.received(delivered, consumer.subscription)
        labels = these if labels is None else labels.unionByName(these)
        received = got if received is None else received.unionByName(got)
        stopped = {r["stream"]: r[f"stop_{n}"] for r in stop_rows}
        info.append({"name": consumer.name, "subscription": consumer.subscription,
                     "bookies_down": list(consumer.bookies_down), "ended": ended,
                     "stopped_at": stopped, "visible": ended or any(stopped.values())})
    files = write_trace(spark, lines, small, folder, s.run_id)
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
        "anomalies": _anomalies(plan, T.blocks(labels), found, info),
        "outages": _outages(plan, T.outages(messages, plan, threshold_ms, ladder)),
        "outage_threshold_ms": threshold_ms,
        "backoff_ladder_ms": ladder,
        "files": [p.name for p in files],
    }
    truth["runs"] = _runs(s, info, counts, truth["anomalies"], int(totals["ack"] or 0),
                          int(totals["nack"] or 0))
    truth["generate_s"] = round(time.monotonic() - started, 2)
    (folder / TRUTH_FILE).write_text(json.dumps(truth, indent=1, default=str) + "\n")
    return truth


def _anomalies(plan: Plan, found: list[dict], consumers: list[C.Consumer],
               info: list[dict]) -> list[dict[str, Any]]:
    """Blocks with partition, producer and true cause; none for a consumer the trace cannot show."""
    partitioned = bool(plan.scenario.partitions)
    by_subscription = {c.subscription: c for c in consumers}
    visible = {c["subscription"] for c in info if c["visible"]}
    found = [b for b in found if b["subscription"] in visible]
    for block in found:
        stream = block.pop("stream")
        block.update(partition=stream if partitioned else -1, producer=producer_name(stream, partitioned),
                     cause=cause_of(plan, block["kind"], by_subscription[block["subscription"]]))
    return found


def _outages(plan: Plan, found: list[dict]) -> list[dict[str, Any]]:
    partitioned = bool(plan.scenario.partitions)
    for outage in found:
        stream = outage.pop("stream")
        outage.update(partition=stream if partitioned else -1, producer=producer_name(stream, partitioned),
                      cause={"fault": plan.faults[0], "reconnect": plan.reconnect})
    return found


def _runs(s: Scenario, info: list[dict], counts: dict[str, int], anomalies: list[dict],
          acked: int, nacked: int) -> list[dict[str, Any]]:
    """Expected `analyze --json` "runs" rows, one per subscription, sorted like the product.

    A consumer that received nothing and has no `end` left no line in the trace: no reader of
    the trace can know it existed, so it has no row (truth.json's "consumers" still lists it).
    """
    rows = []
    for run in (c for c in info if c["visible"]):
        row = {"run_id": s.run_id, "topic": s.topic, "subscription": run["subscription"],
               "sent": s.messages * s.streams, "acked": acked, "nacked": nacked,
               "received": int(counts.get(run["subscription"], 0))}
        for kind in ("lost", "unseen", "unacked_received", "duplicated", "redelivered", "out_of_order"):
            row[kind] = sum(a["count"] for a in anomalies
                            if a["subscription"] == run["subscription"] and a["kind"] == kind)
        row["valid"] = T.valid(row, s.dedup, run["ended"])
        rows.append(row)
    return sorted(rows, key=lambda r: r["subscription"])
