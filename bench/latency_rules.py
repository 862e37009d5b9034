"""The pure parts of bench/watch_latency.py: reading a trace, the replay's pacing, the moment
a provisional finding became provable, percentiles and the table. No Spark, no processes;
the clock is injected so that the pacing is tested without waiting.

Provable moment of an alert, in the trace's own clock (ms), then mapped to the wall time at
which the replay wrote the first line at or after it (the watch's `now` is the latest event
of the run, pipelines/live.py, so nothing earlier can prove it):
- outage_in_progress: its `first_ts` (the finding's started_at: the last completion or rise
  of in-flight messages) plus the first backoff step (`pipeline.backoff_ladder_ms[0]`);
- outage (a closed one, alerted only once seen closed): the first ack of its producer after
  its `first_ts`, the ack that closed it;
- suspected_loss: the later of the block's first seq's ack and the subscription's first
  delivery of a later seq of that producer, plus `pipeline.suspected_loss_ms`.
Other kinds have no rule here: they are counted, not timed.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

TITLE_SEQS = re.compile(r"producer (?P<producer>[^,)\s]+), seq (?P<first>\d+)")
TITLE_PRODUCER = re.compile(r"producer (?P<producer>[^,)\s]+)")


def ts_ms(value: Any) -> float:  # noqa: ANN401 - a trace's ts: epoch ms or RFC 3339 text
    """A trace or alert time as epoch milliseconds."""
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1000


def read_trace(folder: Path) -> list[dict[str, Any]]:
    """Every event of the folder's trace-*.jsonl(.gz) files (not the cluster's or logs' files
    a simulated or captured run has beside them), in trace-time order (stable)."""
    events = []
    for path in sorted([*folder.glob("trace*.jsonl"), *folder.glob("trace*.jsonl.gz")]):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            events.extend(json.loads(line) for line in handle if line.strip())
    return sorted(events, key=lambda e: ts_ms(e["ts"]))


def due_offsets(stamps_ms: list[float], rate: float | None, recorded_rate: float) -> list[float]:
    """Seconds after the replay's start at which each line (sorted by trace time) is due: the
    recorded pace, or sped up by rate / recorded_rate (the run's sends per second while it
    sends), the whole timeline alike, pauses included."""
    if not stamps_ms:
        return []
    speed = rate / recorded_rate if rate and recorded_rate > 0 else 1.0
    return [(ms - stamps_ms[0]) / 1000 / speed for ms in stamps_ms]


def send_rate(events: list[dict[str, Any]]) -> float:
    """Sends per second between the first and the last send of the events (0: fewer than 2)."""
    sends = [ts_ms(e["ts"]) for e in events if e.get("event") == "send"]
    span_s = (max(sends) - min(sends)) / 1000 if len(sends) > 1 else 0.0
    return (len(sends) - 1) / span_s if span_s > 0 else 0.0


def replay(
    lines: list[dict[str, Any]],
    offsets: list[float],
    write: Callable[[dict[str, Any]], None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    wall: Callable[[], float],
    after_each_pass: Callable[[], None] = lambda: None,
) -> list[float]:
    """Write each line once its offset is due (every due line in one pass, then sleep until
    the next is due); the wall time at which each was written."""
    start, written, index = clock(), [], 0
    while index < len(lines):
        wait = start + offsets[index] - clock()
        if wait > 0:
            sleep(wait)
        now = clock() - start
        while index < len(lines) and offsets[index] <= now:
            write(lines[index])
            written.append(wall())
            index += 1
        after_each_pass()
    return written


def _later(events: Iterable[dict[str, Any]], after_ms: float, **match: Any) -> float | None:
    times = [
        ts_ms(e["ts"])
        for e in events
        if all(e.get(k) == v for k, v in match.items()) and ts_ms(e["ts"]) > after_ms
    ]
    return min(times, default=None)


def _suspected_loss_ts(alert: dict[str, Any], events: list[dict], loss_ms: int) -> float | None:
    seqs = TITLE_SEQS.search(alert.get("title") or "")
    if not seqs:
        return None
    producer, first = seqs.group("producer"), int(seqs.group("first"))
    key = {"run_id": alert["run_id"], "topic": alert["topic"]}
    acks = [
        ts_ms(e["ts"])
        for e in events
        if e.get("event") == "ack"
        and e.get("client") == producer
        and e.get("seq") == first
        and all(e.get(k) == v for k, v in key.items())
    ]
    later = [
        ts_ms(e["ts"])
        for e in events
        if e.get("event") == "receive"
        and e.get("subscription") == alert["subscription"]
        and e.get("producer") == producer
        and (e.get("seq") or -1) > first
        and all(e.get(k) == v for k, v in key.items())
    ]
    if not acks or not later:
        return None
    return max(min(acks), min(later) + loss_ms)


def provable_ts(
    alert: dict[str, Any], events: list[dict[str, Any]], backoff_step_ms: int, loss_ms: int
) -> float | None:
    """The trace time (ms) from which the alert's finding is provable (module docstring);
    None for a kind without a rule or a finding the trace cannot place."""
    kind, first_ts = alert.get("kind"), alert.get("first_ts")
    if kind == "outage_in_progress" and first_ts:
        return ts_ms(first_ts) + backoff_step_ms
    if kind == "outage" and first_ts:
        producer = TITLE_PRODUCER.search(alert.get("title") or "")
        match = {"run_id": alert["run_id"], "event": "ack"}
        match |= {"client": producer.group("producer")} if producer else {}
        return _later(events, ts_ms(first_ts), **match)
    if kind == "suspected_loss":
        return _suspected_loss_ts(alert, events, loss_ms)
    return None


def written_at(stamps_ms: list[float], written: list[float], proof_ms: float) -> float | None:
    """The wall time the first line at or after trace time `proof_ms` was written (None:
    no such line was replayed)."""
    index = bisect.bisect_left(stamps_ms, proof_ms)
    return written[index] if index < len(written) else None


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_table(latencies: dict[str, list[float | None]]) -> str:
    """Markdown: per kind, alerts, how many were timed, median / p99 / max latency (s)."""
    lines = [
        "| kind | alerts | timed | median s | p99 s | max s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, values in sorted(latencies.items()):
        timed = [v for v in values if v is not None]
        figures = (
            [f"{percentile(timed, 50):.1f}", f"{percentile(timed, 99):.1f}", f"{max(timed):.1f}"]
            if timed
            else ["–"] * 3
        )
        lines.append(f"| {kind} | {len(values)} | {len(timed)} | {' | '.join(figures)} |")
    return "\n".join(lines)


def gaps_before(batches: list[tuple[float, int, int, float]]) -> list[float | None]:
    """Per micro-batch (ended wall time, id, files, seconds; in the order they ended): the
    seconds from the end of the one before to its own start (its end less its seconds);
    None for the first. What the stream spends between two micro-batches: the watch's view
    of the one before, the query's own bookkeeping (offsets, listing, commit log) and any
    wait for a new file."""
    return [
        None if n == 0 else (ended - seconds) - batches[n - 1][0]
        for n, (ended, _, _, seconds) in enumerate(batches)
    ]
