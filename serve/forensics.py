"""Forensics: the whole life of one message, answered from the tables now or as of earlier.

Every table read is filtered by the message's key before anything is collected: one message
has a handful of events, whatever the size of the run.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.spark import side_by_side
from serve.explain import infra_near, log_message

MESSAGE_KEY = ["run_id", "topic", "partition", "producer", "seq"]
MAX_INFRA = 50
MAX_CANDIDATES = 10
MAX_NEAR_RUNS = 5
# The version a VERSION --as-of counts in: the table that holds the findings.
AS_OF_TABLE = "anomalies"
# A recomputation writes these before the findings: the end of a VERSION's snapshot.
RECOMPUTED_WITH = ("message_history", "delivery", AS_OF_TABLE)
MESSAGE_TABLES = (
    "message_history",
    "producer_events",
    "delivery",
    "anomalies",
    "outages",
    "infra_events",
)


@dataclass(frozen=True)
class Snapshot:
    """Every table as it stood at `at` (now when None), and the versions that were read."""

    lakehouse: Lakehouse
    at: datetime | None = None

    def read(self, table: str) -> DataFrame:
        return self.lakehouse.read_as_of(table, self.at)

    def versions(self, tables: tuple[str, ...]) -> dict[str, int | None]:
        """Each table's version read (None: not written yet). Now: a local lakehouse's from
        the names in `_delta_log/`, no Spark job (six history jobs were a third of a warm
        `message`); as of a time: the tables' histories, side by side."""
        if self.at is None:
            found = self.lakehouse.versions(tables)
            return {t: (found[t] if found[t] >= 0 else None) for t in tables}
        found = side_by_side(*(partial(self.lakehouse.version_at, t, self.at) for t in tables))
        return dict(zip(tables, found, strict=True))


def parse_as_of(lakehouse: Lakehouse, text: str | None) -> datetime | None:
    """--as-of VERSION (of gold.anomalies) or TIMESTAMP (ISO 8601) → a UTC moment.

    VERSION N is the lakehouse while gold.anomalies was at version N: every table as of just
    before the next write to gold.anomalies or to the silver tables it is built from (a
    recomputation begins with those), or now when there was none.
    """
    if text is None:
        return None
    if text.isdigit():
        return _while_at_version(lakehouse, int(text))
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--as-of {text!r}: expected a version number of gold.{AS_OF_TABLE} or an ISO 8601 "
            "timestamp such as 2026-11-22T10:15:00Z"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _while_at_version(lakehouse: Lakehouse, version: int) -> datetime:
    commits = dict(lakehouse.commits(AS_OF_TABLE))
    if version not in commits:
        raise InputError(
            f"--as-of {version}: gold.{AS_OF_TABLE} has no version {version} "
            f"(versions {min(commits)}..{max(commits)})"
        )
    written = commits[version]
    later = [ts for table in RECOMPUTED_WITH for _, ts in lakehouse.commits(table) if ts > written]
    if not later:
        return datetime.now(UTC).replace(tzinfo=None)
    return min(later) - timedelta(milliseconds=1)


def _key_filter(run_id: str, seq: int, producer: str | None, topic: str | None):  # noqa: ANN202
    condition = (F.col("run_id") == run_id) & (F.col("seq") == seq)
    if producer is not None:
        condition &= F.col("producer") == producer
    if topic is not None:
        condition &= F.col("topic") == topic
    return condition


def find_message(
    snapshot: Snapshot, run_id: str, seq: int, producer: str | None, topic: str | None
) -> dict[str, Any]:
    """The message's silver.message_history row; fail naming the candidates if not one."""
    found = (
        snapshot.read("message_history")
        .filter(_key_filter(run_id, seq, producer, topic))
        .limit(MAX_CANDIDATES)
        .collect()
    )
    if len(found) == 1:
        return found[0].asDict(recursive=True)
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


def check_run_exists(snapshot: Snapshot, run_id: str) -> None:
    """Fail naming the runs of gold.run_summary whose ids are near `run_id` when it is none."""
    summary = snapshot.read("run_summary")
    runs = [r["run_id"] for r in summary.select("run_id").distinct().collect()]  # one per run
    if run_id in runs:
        return
    near = difflib.get_close_matches(run_id, runs, n=MAX_NEAR_RUNS)
    if near:
        hint = f"near names: {', '.join(near)}"
    elif runs:
        hint = f"none is near; `pulsar-audit summary` lists its {len(runs)} run(s)"
    else:
        hint = "it has no runs yet: `pulsar-audit analyze PATH` ingests and judges some"
    raise InputError(f"run {run_id!r} does not exist in this lakehouse ({hint})")


def _is_message(message: dict[str, Any], producer_column: str = "producer"):  # noqa: ANN202
    return (
        (F.col("run_id") == message["run_id"])
        & (F.col("topic") == message["topic"])
        & (F.col("partition") == message["partition"])
        & (F.col(producer_column) == message["producer"])
        & (F.col("seq") == message["seq"])
    )


def producer_events(snapshot: Snapshot, message: dict[str, Any]) -> list[dict[str, Any]]:
    """Sends (a second send is a retry), acks and nacks of the message, in the client's order."""
    events = snapshot.read("producer_events").filter(_is_message(message, "client"))
    ordered = events.orderBy("ts", "event_index", "source_file", "line_number")
    return [
        r.asDict()
        for r in ordered.select(
            "event",
            "ts",
            "ledger_id",
            "entry_id",
            "batch_index",
            "error",
            "source_file",
            "line_number",
        ).collect()
    ]


def deliveries(snapshot: Snapshot, message: dict[str, Any]) -> list[dict[str, Any]]:
    """Every delivery of the message, per subscription and consumer, in time order."""
    rows = snapshot.read("delivery").filter(_is_message(message)).orderBy("ts", "consumer")
    return [
        r.asDict()
        for r in rows.select(
            "subscription",
            "consumer",
            "ts",
            "ledger_id",
            "entry_id",
            "batch_index",
            "redelivery_count",
            "delivery_index",
            "key",
        ).collect()
    ]


def subscription_types(snapshot: Snapshot, message: dict[str, Any]) -> dict[str, str | None]:
    """subscription → its type (gold.run_summary; a handful of rows per run and topic)."""
    runs = snapshot.read("run_summary").filter(
        (F.col("run_id") == message["run_id"]) & (F.col("topic") == message["topic"])
    )
    return {r["subscription"]: r["subscription_type"] for r in runs.collect()}


def findings(snapshot: Snapshot, message: dict[str, Any], until: datetime | None) -> list[dict]:
    """The anomaly blocks holding the message's seq, and outages while it was in flight."""
    same_stream = (
        (F.col("run_id") == message["run_id"])
        & (F.col("topic") == message["topic"])
        & (F.col("partition") == message["partition"])
        & (F.col("producer") == message["producer"])
    )
    holds_seq = F.col("seq_from") <= message["seq"]
    holds_seq &= F.col("seq_to") >= message["seq"]
    anomalies = snapshot.read("anomalies").filter(same_stream & holds_seq)
    found = [
        {**r.asDict(recursive=True), "id": r["anomaly_id"]}
        for r in anomalies.select(
            "anomaly_id",
            "kind",
            "subscription",
            "seq_from",
            "seq_to",
            "count",
            "explanation",
            "causes",
        ).collect()
    ]
    sent = message["send_ts"]
    if sent is not None:
        done = until or sent
        overlaps = (F.col("start") <= done) & (F.col("end") >= sent)
        outages = snapshot.read("outages").filter(same_stream & overlaps)
        found += [
            {**r.asDict(recursive=True), "id": r["outage_id"], "kind": "outage"}
            for r in outages.select(
                "outage_id", "start", "end", "duration_ms", "explanation", "causes"
            ).collect()
        ]
    return sorted(found, key=lambda f: (f["kind"], f["id"]))


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
    """Everything the tables hold about one message (the `message --json` object)."""
    message = find_message(snapshot, run_id, seq, producer, topic)
    produced = producer_events(snapshot, message)
    types = subscription_types(snapshot, message)
    delivered = [
        {**d, "subscription_type": types.get(d["subscription"])}
        for d in deliveries(snapshot, message)
    ]
    moments = [e["ts"] for e in produced] + [d["ts"] for d in delivered]
    start, end = (min(moments), max(moments)) if moments else (None, None)
    completed = message["ack_ts"] or message["nack_ts"]
    return {
        "message": {k: message[k] for k in MESSAGE_KEY},
        "as_of": {
            "at": snapshot.at,
            "versions": snapshot.versions(MESSAGE_TABLES),
        },
        "history": {
            k: message[k]
            for k in (
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
        },
        "producer_events": produced,
        "deliveries": delivered,
        "findings": findings(snapshot, message, completed),
        "infra_events": infra_around(snapshot, message["topic"], start, end) if start else [],
    }
