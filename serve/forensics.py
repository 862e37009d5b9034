"""Forensics: the whole life of one message, answered from the tables now or as of earlier.

Every table read is filtered by the message's key before anything is collected: one message
has a handful of events, whatever the size of the run.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_audit.errors import InputError
from pulsar_audit.spark import side_by_side
from serve.explain import infra_near, log_message
from serve.snapshot import Snapshot, check_run_exists

MESSAGE_KEY = ["run_id", "topic", "partition", "producer", "seq"]
MAX_INFRA = 50
MAX_CANDIDATES = 10
MESSAGE_TABLES = (
    "message_history",
    "producer_events",
    "delivery",
    "anomalies",
    "outages",
    "infra_events",
)


def _key_filter(  # noqa: ANN202
    run_id: str, seq: int, producer: str | None, topic: str | None, *, client: bool = False
):
    """Rows of `seq` in the run, of the named producer and topic if any (in producer_events
    the producer is the `client` column)."""
    condition = (F.col("run_id") == run_id) & (F.col("seq") == seq)
    if producer is not None:
        condition &= F.col("client" if client else "producer") == producer
    if topic is not None:
        condition &= F.col("topic") == topic
    return condition


def _candidates(
    snapshot: Snapshot, run_id: str, seq: int, producer: str | None, topic: str | None
) -> list[dict[str, Any]]:
    found = (
        snapshot.read("message_history")
        .filter(_key_filter(run_id, seq, producer, topic))
        .limit(MAX_CANDIDATES)
        .collect()
    )
    return [r.asDict(recursive=True) for r in found]


def _one_message(
    snapshot: Snapshot,
    found: list[dict[str, Any]],
    run_id: str,
    seq: int,
    producer: str | None,
    topic: str | None,
) -> dict[str, Any]:
    """The message's silver.message_history row; fail naming the candidates if not one."""
    if len(found) == 1:
        return found[0]
    if not found:
        check_run_exists(snapshot, run_id)
        raise InputError(
            f"no message with seq {seq} in run {run_id!r}"
            + (f" from producer {producer!r}" if producer else "")
            + (f" on topic {topic!r}" if topic else "")
            + " in silver.message_history (has `pipeline` run since the trace was ingested?)"
        )
    choices = sorted({f"--producer {r['producer']} --topic {r['topic']}" for r in found})
    raise InputError(
        f"{len(found)} messages have seq {seq} in run {run_id!r}; name one with {choices}"
    )


KEY_COLUMNS = ("topic", "partition")
PRODUCER_EVENT_COLUMNS = (
    "event",
    "ts",
    "ledger_id",
    "entry_id",
    "batch_index",
    "error",
    "source_file",
    "line_number",
)
DELIVERY_COLUMNS = (
    "subscription",
    "consumer",
    "ts",
    "ledger_id",
    "entry_id",
    "batch_index",
    "redelivery_count",
    "delivery_index",
    "key",
)
ANOMALY_COLUMNS = (
    "anomaly_id",
    "kind",
    "subscription",
    "seq_from",
    "seq_to",
    "count",
    "explanation",
    "causes",
)
HISTORY = (
    "sent",
    "send_ts",
    "acked",
    "ack_ts",
    "ack_latency_ms",
    "ack_id",
    "nacked",
    "nack_ts",
    "nack_error",
    "copies",
    "subscriptions",
    "key",
)


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _reads_by_seq(
    snapshot: Snapshot, run_id: str, seq: int, producer: str | None, topic: str | None
) -> list[list[dict[str, Any]]]:
    """What needs only the seq (and the named producer and topic): the producer events and
    deliveries of every message with that seq, the anomaly blocks holding it, the run's
    subscription types (gold.run_summary: a handful of rows per run and topic); each still
    to be narrowed to the one message's key, side by side."""
    events = snapshot.read("producer_events").filter(
        _key_filter(run_id, seq, producer, topic, client=True)
    )
    produced = events.select(
        *KEY_COLUMNS, F.col("client").alias("producer"), *PRODUCER_EVENT_COLUMNS, "event_index"
    )
    delivered = (
        snapshot.read("delivery")
        .filter(_key_filter(run_id, seq, producer, topic))
        .select(*KEY_COLUMNS, "producer", *DELIVERY_COLUMNS)
    )
    holds_seq = (F.col("run_id") == run_id) & (F.col("seq_from") <= seq) & (F.col("seq_to") >= seq)
    if producer is not None:
        holds_seq &= F.col("producer") == producer
    if topic is not None:
        holds_seq &= F.col("topic") == topic
    anomalies = snapshot.read("anomalies").filter(holds_seq)
    blocks = anomalies.select(*KEY_COLUMNS, "producer", *ANOMALY_COLUMNS)
    summary = snapshot.read("run_summary").filter(F.col("run_id") == run_id)
    types = summary.select("topic", "subscription", "subscription_type")
    return side_by_side(*(partial(_rows, df) for df in (produced, delivered, blocks, types)))


def _same_key(row: dict[str, Any], message: dict[str, Any]) -> bool:
    return (
        row["topic"] == message["topic"]
        and row["partition"] == message["partition"]
        and row["producer"] == message["producer"]
    )


def _without_key(row: dict[str, Any], *also: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in (*KEY_COLUMNS, "producer", *also)}


def _nulls_first(row: dict[str, Any], columns: tuple[str, ...]) -> tuple:
    """A sort key ordering as Spark's ascending sort does (nulls first)."""
    return tuple((row[c] is not None, row[c]) for c in columns)


def _finding(block: dict[str, Any]) -> dict[str, Any]:
    return {**_without_key(block), "id": block["anomaly_id"]}


def outages_in_flight(
    snapshot: Snapshot, message: dict[str, Any], until: datetime | None
) -> list[dict[str, Any]]:
    """The outages of the message's stream while it was in flight (sent .. acked or nacked)."""
    sent = message["send_ts"]
    if sent is None:
        return []
    same_stream = (
        (F.col("run_id") == message["run_id"])
        & (F.col("topic") == message["topic"])
        & (F.col("partition") == message["partition"])
        & (F.col("producer") == message["producer"])
    )
    overlaps = (F.col("start") <= (until or sent)) & (F.col("end") >= sent)
    outages = snapshot.read("outages").filter(same_stream & overlaps)
    return [
        {**r, "id": r["outage_id"], "kind": "outage"}
        for r in _rows(
            outages.select("outage_id", "start", "end", "duration_ms", "explanation", "causes")
        )
    ]


def infra_around(
    snapshot: Snapshot, topic: str, start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """Infrastructure events of the topic (or of no one topic) on the corrected clock.

    Repeats of one kind on one host (a thousand failed writes of a closing ledger) are one
    row with their count, first and last time, and the first one's detail (a log line's
    message, as `explain` shows it: `serve.explain.log_message`).
    """
    concerns = F.col("topic").isNull() | (F.col("topic") == topic)
    events = infra_near(snapshot.read("infra_events"), start, end).filter(concerns)
    first = F.struct("corrected_ts", "event_id")
    grouped = events.groupBy("source", "host", "clock", "event_type").agg(
        F.min("corrected_ts").alias("corrected_ts"),
        F.max("corrected_ts").alias("last_ts"),
        F.count("*").alias("count"),
        F.min_by(F.coalesce("detail", log_message(F.col("raw"))), first).alias("detail"),
        F.min_by("ledger_id", first).alias("ledger_id"),
        F.min_by("bookie", first).alias("bookie"),
    )
    chosen = grouped.orderBy("corrected_ts", "host", "event_type").limit(MAX_INFRA)
    return [r.asDict() for r in chosen.collect()]


def message_life(
    snapshot: Snapshot,
    run_id: str,
    seq: int,
    producer: str | None = None,
    topic: str | None = None,
) -> dict[str, Any]:
    """Everything the tables hold about one message (the `message --json` object).

    Two rounds of reads, each side by side (a warm `message` is its Spark jobs: seven one
    after the other were 2 s at 10⁶ messages): first the message's row and every table read
    that needs only its seq, producer and topic (filtered to its exact key once it is known);
    then the outages and infrastructure events, which need its times.
    """
    candidates, by_seq = side_by_side(
        partial(_candidates, snapshot, run_id, seq, producer, topic),
        partial(_reads_by_seq, snapshot, run_id, seq, producer, topic),
    )
    message = _one_message(snapshot, candidates, run_id, seq, producer, topic)
    produced_rows, delivered_rows, anomaly_rows, type_rows = by_seq
    # sorted here, not in Spark: a sort of a handful of rows cost a sampling job
    produced = [
        _without_key(e, "event_index")
        for e in sorted(
            (e for e in produced_rows if _same_key(e, message)),
            key=lambda e: _nulls_first(e, ("ts", "event_index", "source_file", "line_number")),
        )
    ]
    types = {
        r["subscription"]: r["subscription_type"]
        for r in type_rows
        if r["topic"] == message["topic"]
    }
    delivered = [
        {**_without_key(d), "subscription_type": types.get(d["subscription"])}
        for d in sorted(
            (d for d in delivered_rows if _same_key(d, message)),
            key=lambda d: _nulls_first(d, ("ts", "consumer")),
        )
    ]
    moments = [e["ts"] for e in produced] + [d["ts"] for d in delivered]
    start, end = (min(moments), max(moments)) if moments else (None, None)
    completed = message["ack_ts"] or message["nack_ts"]
    outage_rows, infra = side_by_side(
        partial(outages_in_flight, snapshot, message, completed),
        partial(infra_around, snapshot, message["topic"], start, end) if start else list,
    )
    anomalies = [_finding(a) for a in anomaly_rows if _same_key(a, message)]
    return {
        "message": {k: message[k] for k in MESSAGE_KEY},
        "as_of": {
            "at": snapshot.at,
            "versions": snapshot.versions(MESSAGE_TABLES),
        },
        "history": {k: message[k] for k in HISTORY},
        "producer_events": produced,
        "deliveries": delivered,
        "findings": sorted(anomalies + outage_rows, key=lambda f: (f["kind"], f["id"])),
        "infra_events": infra,
    }
