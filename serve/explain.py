"""`explain`: the merged timeline (trace, broker, bookie, client, ZooKeeper) around a finding."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from serve.overlaps import STREAM, overlap_pairs

# A finding's timeline: from BEFORE its start to AFTER its end (what led to it, what it left).
BEFORE = timedelta(seconds=5)
AFTER = timedelta(seconds=1)
MAX_LINES = 200
# Consecutive events of one type from one source and host, each this close to the one before,
# are one row (a closing ledger's thousand failed writes).
REPEAT_GAP_S = 1.0
# A log4j-style line's time, [thread], level and logger package: what the row's ts, source and
# host already say. The logger's class name and the message are kept.
_LOG_PREFIX = (
    r"^\d{4}-\d\d-\d\d[T ][\d:.,]+(?:[+-]\d\d:?\d\d|Z)?\s+\[[^\]]*\]\s+[A-Z]+\s+(?:[\w$]+\.)*"
)


def infra_near(infra_events: DataFrame, start: datetime, end: datetime) -> DataFrame:
    """silver.infra_events on the corrected clock around a finding (`explain`, `message`)."""
    return infra_events.filter(F.col("corrected_ts").between(start - BEFORE, end + AFTER))


def log_message(raw: Column) -> Column:
    """A log line's first line without its time, thread, level and logger package."""
    return F.regexp_replace(F.split(raw, "\n")[0], _LOG_PREFIX, "")


def collapse_repeats(events: DataFrame) -> DataFrame:
    """Timeline rows (ts, source, host, event_type, what) → one row per burst: events of one
    type from one source and host with no other event of that host between them, each within
    REPEAT_GAP_S of the one before; with its count, first ts, last_ts and the first one's text.
    """
    by_host = W.partitionBy("source", "host").orderBy("ts", "event_type", "what")
    seconds = F.col("ts").cast("double")
    same_type = F.lag("event_type").over(by_host) == F.col("event_type")
    close = (seconds - F.lag(seconds).over(by_host)) <= REPEAT_GAP_S
    starts_burst = ~F.coalesce(same_type & close, F.lit(False))
    so_far = by_host.rowsBetween(W.unboundedPreceding, W.currentRow)
    bursts = events.withColumn("burst", F.sum(starts_burst.cast("int")).over(so_far))
    first = F.struct("ts", "what")
    return bursts.groupBy("source", "host", "event_type", "burst").agg(
        F.min("ts").alias("ts"),
        F.max("ts").alias("last_ts"),
        F.count(F.lit(1)).alias("count"),
        F.min_by("what", first).alias("what"),
    )


def _finding(lakehouse: Lakehouse, run_id: str, finding_id: str) -> dict[str, Any]:
    anomalies = (
        lakehouse.read("anomalies")
        .filter((F.col("run_id") == run_id) & F.col("anomaly_id").startswith(finding_id))
        .select(
            F.col("anomaly_id").alias("id"),
            "kind",
            "topic",
            F.col("first_ts").alias("start"),
            F.col("last_ts").alias("end"),
            "explanation",
            "causes",
        )
    )
    outages = (
        lakehouse.read("outages")
        .filter((F.col("run_id") == run_id) & F.col("outage_id").startswith(finding_id))
        .select(
            F.col("outage_id").alias("id"),
            F.lit("outage").alias("kind"),
            "topic",
            "start",
            "end",
            "explanation",
            "causes",
        )
    )
    found = anomalies.unionByName(outages).limit(2).collect()
    if len(found) != 1:
        what = "no" if not found else "more than one"
        raise InputError(
            f"{what} anomaly or outage of run {run_id!r} has an id starting {finding_id!r}"
        )
    return found[0].asDict(recursive=True)


def _run_window(lakehouse: Lakehouse, run_id: str) -> tuple[datetime, datetime]:
    """From the run's first to its last client event, producers' and consumers' alike."""
    events = [
        lakehouse.read(table).filter(F.col("run_id") == run_id).select("ts")
        for table in ("producer_events", "consumer_events")
    ]
    span = (
        events[0]
        .unionByName(events[1])
        .agg(F.min("ts").alias("start"), F.max("ts").alias("end"))
        .first()
    )
    if span is None or span.start is None:
        raise InputError(f"run {run_id!r} has no client events in this lakehouse")
    return span.start, span.end


def _timeline(lakehouse: Lakehouse, run_id: str, start: datetime, end: datetime) -> DataFrame:
    lo, hi = start - BEFORE, end + AFTER
    infra = infra_near(lakehouse.read("infra_events"), start, end).select(
        F.col("corrected_ts").alias("ts"),
        "source",
        "host",
        "event_type",
        F.coalesce("detail", log_message(F.col("raw"))).alias("what"),
    )
    chaos = (
        lakehouse.read("run_events")
        .filter(F.col("run_id") == run_id)
        .select(
            "ts",
            F.lit("trace").alias("source"),
            "client",
            F.concat(F.lit("run_"), "event"),
            F.concat_ws(" ", "action", "target", "scenario"),
        )
    )
    findings = [
        lakehouse.read("outages")
        .filter(F.col("run_id") == run_id)
        .select("start", F.lit("gold").alias("source"), "producer", F.lit("outage"), "explanation"),
        lakehouse.read("anomalies")
        .filter(F.col("run_id") == run_id)
        .select("first_ts", F.lit("gold").alias("source"), "producer", "kind", "explanation"),
    ]
    once = [part.toDF(*infra.columns) for part in (chaos, *findings)]
    merged = once[0]
    for part in once[1:]:
        merged = merged.unionByName(part)
    single = merged.select(
        *infra.columns, F.col("ts").alias("last_ts"), F.lit(1).cast("long").alias("count")
    )
    collapsed = collapse_repeats(infra).select(*single.columns)
    # a finding gold gives no time (a poll skip over messages never delivered) is still the run's
    untimed_finding = (F.col("source") == "gold") & F.col("ts").isNull()
    return collapsed.unionByName(single).filter(F.col("ts").between(lo, hi) | untimed_finding)


def explain(lakehouse: Lakehouse, run_id: str, finding_id: str | None = None) -> dict[str, Any]:
    """The timeline around one finding (by id prefix) or the whole run, oldest first.

    The run's window spans its producer and consumer events (also for a finding without a
    time); findings without a time come last. Each timeline row carries `count` and `last_ts`
    (repeated infrastructure events are one row).
    """
    finding = _finding(lakehouse, run_id, finding_id) if finding_id else None
    timed = finding is not None and finding["start"] is not None
    start, end = (finding["start"], finding["end"]) if timed else _run_window(lakehouse, run_id)
    timeline = _timeline(lakehouse, run_id, start, end)
    order = (F.col("ts").asc_nulls_last(), "source", "host")
    rows = [r.asDict() for r in timeline.orderBy(*order).limit(MAX_LINES).collect()]
    return {
        "run_id": run_id,
        "finding": finding,
        "start": start,
        "end": end,
        "timeline": rows,
        "overlaps": _overlaps(lakehouse, run_id, finding),
    }


def _overlaps(
    lakehouse: Lakehouse, run_id: str, finding: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The run's messages counted by two kinds (`serve.overlaps`); of the finding's block only
    when one is asked for."""
    blocks = [
        r.asDict()
        for r in lakehouse.read("anomalies")
        .filter(F.col("run_id") == run_id)
        .select("anomaly_id", *STREAM, "kind", "seq_from", "seq_to")
        .collect()
    ]
    if finding is None:
        return overlap_pairs(blocks)
    [block] = [b for b in blocks if b["anomaly_id"] == finding["id"]] or [None]
    if block is None:  # an outage
        return []
    return [
        pair
        for pair in overlap_pairs(blocks)
        if block["kind"] in pair["kinds"]
        and (pair["subscription"], pair["producer"]) == (block["subscription"], block["producer"])
        and block["seq_from"] <= pair["seq_from"] <= block["seq_to"]
    ]
