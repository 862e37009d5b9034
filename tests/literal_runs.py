"""Hand-written trace runs for tests: each anomaly placed at a chosen seq, so a test can
assert an exact count, block or edge case of the product's definitions (a nack that was
stored anyway, a consumer with no `end`, a duplicate across a ledger boundary, …) that no
protocol model would produce on purpose. Runs that follow the Pulsar/BookKeeper protocols,
with their ground truth and at any size, come from the simulator (`simulate/`,
`pulsar-audit simulate`); this module is a test fixture, not part of the product.

A run is a producer sending `messages` messages every `send_interval_ms`, each acked
`ack_latency_ms` later into ledger `first_ledger`, and Readers reading the topic back. Each
injection changes exactly what the trace format says a real cluster would show:

- lost: acked, never delivered;       - nacked: nack instead of ack, never delivered
- nacked_delivered: nack, yet stored and delivered (a timeout that was in fact written)
- duplicated: stored twice — first copy in `first_ledger`, the retried copy (which the ack
  names) in the next ledger, where every later message goes too — and both copies delivered
- redelivered: the same copy delivered twice;  - swapped: adjacent deliveries (s, s+1) swapped
- outages: {seq: gap_ms}: from the send of `seq`, no completion for gap_ms; every message sent
  meanwhile is acked at the gap's end
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

T0_MS = int(datetime(2025, 3, 4, 10, 0, tzinfo=UTC).timestamp() * 1000)


@dataclass
class RunSpec:
    run_id: str
    messages: int = 100
    topic: str = "persistent://public/default/orders"
    producer: str = "p1"
    readers: tuple[str, ...] = ("reader-1",)
    partition: int = -1
    send_interval_ms: int = 10
    ack_latency_ms: int = 2
    first_ledger: int = 10
    lost: set[int] = field(default_factory=set)
    nacked: set[int] = field(default_factory=set)
    nacked_delivered: set[int] = field(default_factory=set)
    duplicated: set[int] = field(default_factory=set)
    redelivered: set[int] = field(default_factory=set)
    swapped: set[int] = field(default_factory=set)
    outages: dict[int, int] = field(default_factory=dict)
    end: bool = True
    deduplication: bool = False
    gzip: bool = False


def _completion_times(spec: RunSpec) -> dict[int, int]:
    done = {}
    held_until = None
    for seq in range(spec.messages):
        sent = T0_MS + seq * spec.send_interval_ms
        if seq in spec.outages:
            held_until = sent + spec.outages[seq]
        if held_until is not None and sent < held_until:
            done[seq] = held_until
        else:
            held_until = None
            done[seq] = sent + spec.ack_latency_ms
    return done


def producer_events(spec: RunSpec) -> list[dict[str, Any]]:
    base = {
        "run_id": spec.run_id,
        "topic": spec.topic,
        "role": "producer",
        "client": spec.producer,
        "partition": spec.partition,
    }
    events = []
    completions = _completion_times(spec)
    for seq in range(spec.messages):
        events.append(
            {**base, "event": "send", "seq": seq, "ts": T0_MS + seq * spec.send_interval_ms}
        )
        if seq in spec.nacked or seq in spec.nacked_delivered:
            events.append(
                {**base, "event": "nack", "seq": seq, "ts": completions[seq], "error": "Timeout"}
            )
        else:
            ledger, entry = _stored_id(spec, seq, retried=seq in spec.duplicated)
            events.append(
                {
                    **base,
                    "event": "ack",
                    "seq": seq,
                    "ts": completions[seq],
                    "ledger_id": ledger,
                    "entry_id": entry,
                    "batch_index": -1,
                }
            )
    events.sort(key=lambda e: (e["ts"], e["event"] != "send"))
    for index, event in enumerate(events):
        event["event_index"] = index
    return events


def _stored_id(spec: RunSpec, seq: int, retried: bool) -> tuple[int, int]:
    """Where a copy is stored. The retried copies open the next ledger (the new owner's), and
    every later message is written there too, as after a real failover: acked MessageIds only
    grow."""
    after_retries = bool(spec.duplicated) and seq > max(spec.duplicated)
    if retried or after_retries:
        return (spec.first_ledger + 1, seq)
    return (spec.first_ledger, seq)


def _delivery_order(spec: RunSpec) -> list[tuple[int, tuple[int, int]]]:
    """(seq, stored id) in the order a Reader sees them: the ledger's entries, then the next's."""
    entries = []
    for seq in range(spec.messages):
        if seq in spec.lost or seq in spec.nacked:
            continue
        entries.append((seq, _stored_id(spec, seq, retried=False)))
        if seq in spec.redelivered:
            entries.append((seq, _stored_id(spec, seq, retried=False)))
        if seq in spec.duplicated:
            entries.append((seq, _stored_id(spec, seq, retried=True)))
    for seq in spec.swapped:
        i = next(n for n, (s, _) in enumerate(entries) if s == seq)
        entries[i], entries[i + 1] = entries[i + 1], entries[i]
    # ledger by ledger; within one, the order built above (swaps and redeliveries kept)
    return sorted(entries, key=lambda entry: entry[1][0])


def consumer_events(spec: RunSpec, reader: str) -> list[dict[str, Any]]:
    base = {
        "run_id": spec.run_id,
        "topic": spec.topic,
        "role": "consumer",
        "client": reader,
        "partition": spec.partition,
        "subscription": reader,
    }
    start = T0_MS + spec.messages * spec.send_interval_ms + max(spec.outages.values(), default=0)
    events = []
    for n, (seq, (ledger, entry)) in enumerate(_delivery_order(spec)):
        events.append(
            {
                **base,
                "event": "receive",
                "seq": seq,
                "producer": spec.producer,
                "ledger_id": ledger,
                "entry_id": entry,
                "ts": start + 1000 + n,
                "event_index": n,
            }
        )
    if spec.end:
        events.append(
            {**base, "event": "end", "ts": start + 2000 + len(events), "event_index": len(events)}
        )
    return events


def run_events(spec: RunSpec) -> list[dict[str, Any]]:
    return [
        {
            "run_id": spec.run_id,
            "topic": spec.topic,
            "role": "run",
            "client": "harness",
            "event": "config",
            "ts": T0_MS - 1000,
            "ensemble_size": 3,
            "write_quorum": 2,
            "ack_quorum": 2,
            "brokers": 2,
            "bookies": 3,
            "deduplication": spec.deduplication,
            "scenario": "synthetic",
        }
    ]


def write_run(folder: Path, spec: RunSpec) -> list[Path]:
    """Write one file per client of `spec` under `folder`; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"harness": run_events(spec), spec.producer: producer_events(spec)}
    files.update({reader: consumer_events(spec, reader) for reader in spec.readers})
    written = []
    for client, events in files.items():
        suffix = ".jsonl.gz" if spec.gzip else ".jsonl"
        path = folder / f"{spec.run_id}-{client}{suffix}"
        opener = gzip.open if spec.gzip else open
        with opener(path, "wt") as out:
            out.writelines(json.dumps(event) + "\n" for event in events)
        written.append(path)
    return written
