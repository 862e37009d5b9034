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
    """Write one run's trace files and truth.json under `out`; return the truth (a dict)."""
    s = validate(scenario)
    ladder = ladder or DEFAULT_LADDER
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    plan = build_plan(s)
    messages = build_messages(spark, plan)
    copies = C.stored_copies(messages)
    lines = producer_lines(messages, plan)
    small = run_events(plan)
    runs, anomalies, consumer_info = [], [], []
    labels = None
    totals = messages.agg(
        *[F.sum((F.col("outcome") == o).cast("long")).alias(o) for o in ("ack", "nack")]
    ).first()
    acked, nacked = int(totals["ack"] or 0), int(totals["nack"] or 0)
    for index, consumer in enumerate(C.consumers(plan)):
        stops = C.block_positions(copies, plan, consumer)
        stop_rows = stops.collect()
        ended = consumer.stop_fraction == 0 and all(r.block_pos >= r.stored for r in stop_rows)
        delivered = C.deliveries(copies, plan, consumer, stops)
        lines = lines.unionByName(consumer_lines(delivered, plan, consumer, index))
        if ended:
            small.append(end_event(plan, consumer, index))
        these = T._labels(messages, delivered, consumer, ended)
        labels = these if labels is None else labels.unionByName(these)
        received = T.counts(messages, delivered, consumer, ended).first()["received"]
        runs.append({"subscription": consumer.subscription, "received": int(received), "ended": ended})
        consumer_info.append({"name": consumer.name, "subscription": consumer.subscription,
                              "bookies_down": list(consumer.bookies_down), "ended": ended,
                              "stopped_at": {r.stream: r.block_pos for r in stop_rows}})
    files = write_trace(spark, lines, small, folder, s.run_id)
    found = T.blocks(labels)
    partitioned = bool(s.partitions)
    by_consumer = {c.subscription: c for c in C.consumers(plan)}
    for block in found:
        stream = block.pop("stream")
        block.update(partition=stream if partitioned else -1, producer=producer_name(stream, partitioned),
                     cause=cause_of(plan, block["kind"], by_consumer[block["subscription"]]))
        anomalies.append(block)
    outages = T.outages(messages, plan, threshold_ms, ladder)
    for outage in outages:
        stream = outage.pop("stream")
        outage.update(partition=stream if partitioned else -1, producer=producer_name(stream, partitioned),
                      cause={"fault": plan.faults[0], "reconnect": plan.reconnect})
    truth = {
        "format": "pulsar-audit simulate truth v1",
        "run_id": s.run_id,
        "topic": s.topic,
        "scenario": s.as_dict(),
        "config": f"{s.ensemble}-{s.write_quorum}-{s.ack_quorum}",
        "faults": plan.faults,
        "plan": plan.as_dict(),
        "consumers": consumer_info,
        "runs": _runs(s, runs, anomalies, acked, nacked, consumer_info),
        "anomalies": anomalies,
        "outages": outages,
        "outage_threshold_ms": threshold_ms,
        "backoff_ladder_ms": ladder,
        "files": [p.name for p in files],
        "generate_s": round(time.monotonic() - started, 2),
    }
    (folder / TRUTH_FILE).write_text(
        json.dumps(truth, indent=1, default=str) + "\n"
    )
    return truth


def _runs(s: Scenario, runs: list[dict], anomalies: list[dict], acked: int, nacked: int,
          consumer_info: list[dict]) -> list[dict[str, Any]]:
    """Expected `analyze --json` "runs" rows, one per subscription, sorted like the product."""
    rows = []
    for run in runs:
        row = {"run_id": s.run_id, "topic": s.topic, "subscription": run["subscription"],
               "sent": s.messages * s.streams, "acked": acked, "nacked": nacked,
               "received": run["received"]}
        for kind in ("lost", "unseen", "unacked_received", "duplicated", "redelivered", "out_of_order"):
            row[kind] = sum(a["count"] for a in anomalies
                            if a["subscription"] == run["subscription"] and a["kind"] == kind)
        row["valid"] = T.valid(row, s.dedup, run["ended"])
        rows.append(row)
    return sorted(rows, key=lambda r: r["subscription"])
