"""Reference checker in plain Python: every message in a dict, as the chaos harness does.

    .venv/bin/python -m bench.dict_check TRACE_DIR

The harness of the Pulsar chaos-test posts keeps `messages_sent` (value → list of MessageIds
it was read under) and the sets of positively and negatively acked values, then reports
missing acked messages, non-acked messages received, duplicates and out-of-order reads. This
does the same with the product's definitions (pipelines/silver.py, detectors.py,
detect_duplicated.py, detect_outages.py, verdict.py), per (run, topic, subscription),
streaming the files with json.loads and holding every message and delivery in memory.
Prints one JSON report (bench/counts.py). Bad lines are not handled: the benchmark's traces
have none.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.counts import report, trace_files

# Spark sorts a null event_index before any other in a client's order.
NULL_INDEX = -(2**64)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _int(value: Any) -> int | None:
    """An integer field (the format allows strings of digits)."""
    return value if value is None or type(value) is int else int(value)


def _micros(ts: Any) -> int:
    """Epoch microseconds of `ts`: epoch milliseconds (fraction allowed), RFC 3339, or a
    datetime (the columnar form's timestamps)."""
    if isinstance(ts, datetime):
        moment = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
        return (moment - EPOCH) // timedelta(microseconds=1)
    if type(ts) is int:
        return ts * 1000
    if isinstance(ts, str):
        try:
            return int((Decimal(ts) * 1000).to_integral_value())
        except ArithmeticError:
            moment = datetime.fromisoformat(ts.upper().replace("T", " "))
            return int(moment.timestamp()) * 1_000_000 + moment.microsecond
    return int((Decimal(ts) * 1000).to_integral_value())


def _records(files: list[Path]) -> Iterator[tuple[dict[str, Any], str, int]]:
    """Every non-blank line as (record, file, line number)."""
    decode = json.JSONDecoder(parse_float=Decimal).decode  # exact fractions of ms
    for path in files:
        if path.name.endswith(".parquet"):
            yield from _columnar_records(path)
            continue
        opener = gzip.open if path.name.endswith(".gz") else open
        name = str(path)
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield decode(line), name, number


def _columnar_records(path: Path) -> Iterator[tuple[dict[str, Any], str, int]]:
    """Every row of a columnar trace file (Parquet) as (record, file, row number)."""
    import pyarrow.parquet as pq

    number = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=65536):
        for row in batch.to_pylist():
            number += 1
            row = {k: v for k, v in row.items() if v is not None and k != "extra"}
            yield row, str(path), number


class Trace:
    """What the counts need, in dicts keyed by message (run, topic, partition, producer, seq)."""

    def __init__(self) -> None:
        self.records = 0
        # message → [sent, acked, has_nack, acked MessageIds, first send, first completion]
        self.produced: dict[tuple, list] = {}
        self.producers: dict[tuple, set[str]] = defaultdict(set)  # (run, topic) → clients
        # (run, topic, partition, consumer) →
        # [(order, producer, seq, subscription, MessageId, subscription_type)]
        self.receives: dict[tuple, list] = defaultdict(list)
        self.subscribed: set[tuple] = set()  # (run, topic, consumer, subscription)
        self.ended: dict[tuple, str | None] = {}  # (run, topic, consumer) → end's subscription

    def add(self, rec: dict[str, Any], file: str, line: int) -> None:
        self.records += 1
        get = rec.get
        run, topic, role, client, event = (
            get("run_id"),
            get("topic"),
            get("role"),
            get("client"),
            get("event"),
        )
        index = _int(rec.get("event_index"))
        order = (_micros(rec["ts"]), NULL_INDEX if index is None else index, file, line)
        partition = _int(rec.get("partition"))
        partition = -1 if partition is None else partition
        ledger = _int(rec.get("ledger_id"))
        message_id = None
        if ledger is not None:
            batch = _int(rec.get("batch_index"))
            message_id = (ledger, _int(rec.get("entry_id")), -1 if batch is None else batch)
        if role == "producer":
            self._producer(
                run, topic, partition, client, event, _int(rec.get("seq")), order, message_id
            )
        elif role == "consumer" and event == "receive":
            subscription = rec.get("subscription") or client
            self.subscribed.add((run, topic, client, subscription))
            self.receives[(run, topic, partition, client)].append(
                (
                    order,
                    rec.get("producer"),
                    _int(rec["seq"]),
                    subscription,
                    message_id,
                    rec.get("subscription_type"),
                )
            )
        elif role == "consumer" and event == "subscribe":
            self.subscribed.add((run, topic, client, rec.get("subscription") or client))
        elif role == "consumer" and event == "end":
            sub = rec.get("subscription")
            key = (run, topic, client)
            if key not in self.ended or (
                sub is not None and (self.ended[key] is None or sub < self.ended[key])
            ):
                self.ended[key] = sub

    def _producer(self, run, topic, partition, client, event, seq, order, message_id) -> None:  # noqa: ANN001
        self.producers[(run, topic)].add(client)
        if seq is None:
            return
        key = (run, topic, partition, client, seq)
        state = self.produced.get(key)
        if state is None:
            state = self.produced[key] = [False, False, False, set(), None, None]
        if event == "send":
            state[0] = True
            if state[4] is None or order < state[4]:
                state[4] = order
        elif event in ("ack", "nack"):
            if event == "ack":
                state[1] = True
                if message_id is not None:
                    state[3].add(message_id)
            else:
                state[2] = True
            if state[5] is None or order < state[5]:
                state[5] = order


def _subscriptions(trace: Trace) -> dict[tuple, dict[str, bool]]:
    """(run, topic) → {subscription: all its consumers ended} (silver.subscriptions)."""
    ended_by: dict[tuple, bool] = {}
    consumers_with_receives = set()
    for run, topic, consumer, sub in trace.subscribed:
        consumers_with_receives.add((run, topic, consumer))
        key = (run, topic, sub)
        ended_by[key] = ended_by.get(key, True) and (run, topic, consumer) in trace.ended
    for (run, topic, consumer), sub in trace.ended.items():
        if (run, topic, consumer) not in consumers_with_receives:
            key = (run, topic, sub if sub is not None else consumer)
            ended_by[key] = ended_by.get(key, True)
    subs: dict[tuple, dict[str, bool]] = defaultdict(dict)
    for (run, topic, sub), all_ended in ended_by.items():
        subs[(run, topic)][sub] = all_ended
    for run_topic in trace.producers:
        if run_topic not in subs:
            subs[run_topic][""] = False  # no consumer of this topic was traced
    return subs


def _deliveries(trace: Trace, rows: dict[tuple, dict[str, int]]) -> tuple[dict, dict, set]:
    """Walk each consumer's receives in its own order; count out_of_order (shared_reordered
    on a Shared subscription) into `rows`.

    Returns per (message, subscription, MessageId) the deliveries, per message its delivered
    MessageIds, and the (message, subscription) pairs delivered.
    """
    sole = {k: next(iter(v)) for k, v in trace.producers.items() if len(v) == 1}
    pairs: dict[tuple, int] = defaultdict(int)
    delivered_ids: dict[tuple, set] = defaultdict(set)
    delivered: set[tuple] = set()
    for (run, topic, partition, _consumer), receives in trace.receives.items():
        receives.sort(key=lambda r: r[0])
        previous: dict[str, int] = {}
        seen: dict[str, set[int]] = defaultdict(set)
        for _order, producer, seq, sub, message_id, kind in receives:
            producer = producer if producer is not None else sole.get((run, topic))
            if producer is None:
                continue  # unattributed: not a delivery
            message = (run, topic, partition, producer, seq)
            pairs[(message, sub, message_id)] += 1
            delivered_ids[message].add(message_id)
            delivered.add((message, sub))
            first_receipt = seq not in seen[producer]
            went_back = first_receipt and producer in previous and seq < previous[producer]
            # Shared and Key_Shared promise no order per partition (docs/subscription-types.md)
            if went_back and kind not in ("Shared", "Key_Shared"):
                rows[(run, topic, sub)]["out_of_order"] += 1
            elif went_back and kind == "Shared":
                rows[(run, topic, sub)]["shared_reordered"] += 1
            seen[producer].add(seq)
            previous[producer] = seq
    return pairs, delivered_ids, delivered


def _outages(trace: Trace, threshold_ms: float) -> dict[tuple, int]:
    """Per (run, topic): stretches ≥ threshold with messages in flight and none completing."""
    changes: dict[tuple, list] = defaultdict(list)
    for (run, topic, partition, producer, _seq), state in trace.produced.items():
        sent, done = state[4], state[5]
        if sent is None:
            continue
        stream = changes[(run, topic, partition, producer)]
        stream.append((sent, -1, 1))  # (order, −delta for "sends first on a tie", delta)
        if done is not None:
            stream.append((max(sent, done), 1, -1))
    outages: dict[tuple, int] = defaultdict(int)
    for (run, topic, _partition, _producer), stream in changes.items():
        stream.sort(key=lambda c: (c[0], c[1]))
        in_flight, last_completion, last_rise = 0, None, None
        for order, _tie, delta in stream:
            ts = order[0]
            in_flight += delta
            if delta == 1:
                if in_flight == 1:
                    last_rise = ts
                continue
            starts = [t for t in (last_completion, last_rise) if t is not None]
            if starts and (ts - max(starts)) / 1000.0 >= threshold_ms:
                outages[(run, topic)] += 1
            last_completion = ts
    return outages


def count(trace: Trace, threshold_ms: float = 100) -> dict[str, Any]:
    """The report (bench/counts.py) of everything `trace` holds."""
    subs = _subscriptions(trace)
    rows: dict[tuple, dict[str, int]] = {
        (run, topic, sub): defaultdict(int) for (run, topic), s in subs.items() for sub in s
    }
    pairs, delivered_ids, delivered = _deliveries(trace, rows)
    per_topic: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for message, (sent, acked, has_nack, _ids, _sent_at, _done_at) in trace.produced.items():
        topic = per_topic[message[:2]]
        topic["sent"] += sent
        topic["acked"] += acked
        topic["nacked"] += has_nack and not acked
        if acked:
            for sub, all_ended in subs[message[:2]].items():
                if (message, sub) not in delivered:
                    rows[(*message[:2], sub)]["lost" if all_ended else "unseen"] += 1
    for message, sub in delivered:
        row = rows[(*message[:2], sub)]
        row["received"] += 1
        state = trace.produced.get(message)
        acked_ids = state[3] if state else set()
        if len(acked_ids | delivered_ids[message]) >= 2:
            row["duplicated"] += 1
        if not (state and state[1]):
            row["unacked_received"] += 1
    for (message, sub, _id), deliveries in pairs.items():
        if deliveries > 1:
            rows[(*message[:2], sub)]["redelivered"] += 1
    runs = [
        {"run_id": k[0], "topic": k[1], "subscription": k[2], **per_topic[k[:2]], **row}
        for k, row in rows.items()
    ]
    return report("dict", trace.records, runs, _outages(trace, threshold_ms))


def check(root: str | Path, outage_threshold_ms: float = 100) -> dict[str, Any]:
    """Read every trace file under `root` into memory and count."""
    trace = Trace()
    for record, file, line in _records(trace_files(root)):
        trace.add(record, file, line)
    return count(trace, outage_threshold_ms)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", help="a trace folder (or file), as given to analyze")
    parser.add_argument("--outage-threshold-ms", type=float, default=100)
    args = parser.parse_args(argv)
    started = time.monotonic()
    result = check(args.path, args.outage_threshold_ms)
    result["seconds"] = round(time.monotonic() - started, 3)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
