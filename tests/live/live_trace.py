"""A literal trace as a live capture writes it: one run, producer p1 and reader r1, written
into a landing folder in chunks by trace time, so that each finding is proven by one chunk.

p1 sends seq 0..99 every 20 ms, each acked 2 ms later and read by r1 3 ms after its ack,
except: seq 20..39 (sent from 400 ms on) are acked only at 800 ms (an outage of 400 ms);
seq 10 is acked and never delivered (lost); seq 5 is acked and delivered only at 2300 ms,
after everything else (first suspected, then it arrives: out of order). r1 ends at 2400 ms.

Chunks (trace ms): [0, 600) shows the outage in progress (no ack since 400 ms, now 580 ms);
[600, 1500) the acks resuming (outage over) and, with r1 at 1485 ms, seq 5 and 10 missing
while later seqs were delivered over a second ago; [1500, end) the rest, seq 5, and the end.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from literal_runs import T0_MS

RUN, TOPIC, PRODUCER, READER = "live-1", "persistent://public/default/live", "p1", "r1"
MESSAGES, INTERVAL_MS = 100, 20
OUTAGE = range(20, 40)
OUTAGE_START_MS, OUTAGE_END_MS = 400, 800
LOST, LATE, LATE_AT_MS, END_AT_MS = 10, 5, 2300, 2400
CHUNK_BOUNDS_MS = (600, 1500)


def _acked_at(seq: int) -> int:
    return OUTAGE_END_MS if seq in OUTAGE else seq * INTERVAL_MS + 2


def events() -> list[dict[str, Any]]:
    """Every event of the run, `ts` in ms from the run's start (made absolute on writing)."""
    producer = {"run_id": RUN, "topic": TOPIC, "role": "producer", "client": PRODUCER}
    consumer = {"run_id": RUN, "topic": TOPIC, "role": "consumer", "client": READER}
    consumer |= {"subscription": READER, "partition": -1}
    out: list[dict[str, Any]] = [
        {"run_id": RUN, "topic": TOPIC, "role": "run", "client": "harness", "event": "config"}
        | {"ts": -1000, "deduplication": False, "scenario": "live"}
    ]
    sent: list[dict[str, Any]] = []
    for seq in range(MESSAGES):
        stored = {"ledger_id": 10, "entry_id": seq, "batch_index": -1}
        sent.append(producer | {"event": "send", "seq": seq, "ts": seq * INTERVAL_MS})
        sent.append(producer | {"event": "ack", "seq": seq, "ts": _acked_at(seq)} | stored)
    sent.sort(key=lambda e: (e["ts"], e["event"] != "send", e["seq"]))
    received, last = [], 0
    delivered = [s for s in range(MESSAGES) if s not in (LOST, LATE)]
    for seq in [*delivered, LATE]:
        last = max(last + 1, LATE_AT_MS if seq == LATE else _acked_at(seq) + 3)
        stored = {"ledger_id": 10, "entry_id": seq}
        received.append(consumer | {"event": "receive", "seq": seq, "producer": PRODUCER})
        received[-1] |= stored | {"ts": last}
    received.append(consumer | {"event": "end", "ts": END_AT_MS})
    for stream in (sent, received):
        for index, event in enumerate(stream):
            event["event_index"] = index
    return sorted([*out, *sent, *received], key=lambda e: e["ts"])


def chunk(number: int) -> list[dict[str, Any]]:
    """The events of chunk 1, 2 or 3 (CHUNK_BOUNDS_MS)."""
    bounds = (-(10**9), *CHUNK_BOUNDS_MS, 10**9)
    low, high = bounds[number - 1], bounds[number]
    return [e for e in events() if low <= e["ts"] < high]


def write_chunk(landing: Path, number: int) -> Path:
    """Write chunk `number` whole beside the landing folder, then move it in (as a capture
    rolls a file): the watch never sees half a file. Later chunks get later mtimes."""
    landing.mkdir(parents=True, exist_ok=True)
    staged = landing.parent / f".{RUN}-chunk-{number}.jsonl"
    with staged.open("w") as out:
        for event in chunk(number):
            out.write(json.dumps(event | {"ts": T0_MS + event["ts"]}) + "\n")
    written = time.time() - 10 + number  # chunk order, whatever the clock's resolution
    os.utime(staged, (written, written))
    target = landing / f"{RUN}-chunk-{number}.jsonl"
    staged.rename(target)
    return target


# The broker's log of the outage: its bundle's unload asked for 10 ms before the acks stopped,
# begun (ownership disabled: `bundle_unload_started`) 2 ms later (the layout and messages of a
# real standalone's unload, examples/unload-run/logs/broker).
UNLOAD_AT_MS = OUTAGE_START_MS - 10
UNLOAD_STARTED_AT_MS = UNLOAD_AT_MS + 2
BUNDLE = "public/default/0x00000000_0xffffffff"
_BROKER_LINES = (
    (UNLOAD_AT_MS, "pulsar-web-49-1", "org.apache.pulsar.broker.admin.impl.NamespacesBase",
     f"[null] Unloading namespace bundle {BUNDLE}"),
    (UNLOAD_STARTED_AT_MS, "metadata-store-22-1", "org.apache.pulsar.broker.namespace.OwnedBundle",
     f"Disabling ownership: {BUNDLE}"),
)  # fmt: skip


def write_broker_log(landing: Path) -> Path:
    """The broker's log of the unload, rolled into the landing folder whole (as the harness
    rolls a segment): logs/broker/standalone.00000.log."""
    target = landing / "logs" / "broker" / "standalone.00000.log"
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = landing.parent / ".standalone.log"
    lines = []
    for at_ms, thread, logger, message in _BROKER_LINES:
        at = datetime.fromtimestamp((T0_MS + at_ms) / 1000, UTC)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%S,") + f"{at.microsecond // 1000:03d}+0000"
        lines.append(f"{stamp} [{thread}] INFO  {logger} - {message}\n")
    staged.write_text("".join(lines))
    staged.rename(target)
    return target
