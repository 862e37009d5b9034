"""`explain`: the merged timeline (trace, broker, bookie, client, ZooKeeper) around a finding."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError

# A finding's timeline: from BEFORE its start to AFTER its end (what led to it, what it left).
BEFORE = timedelta(seconds=5)
AFTER = timedelta(seconds=1)
MAX_LINES = 200


def infra_near(infra_events: DataFrame, start: datetime, end: datetime) -> DataFrame:
    """silver.infra_events on the corrected clock around a finding (`explain`, `message`)."""
    return infra_events.filter(F.col("corrected_ts").between(start - BEFORE, end + AFTER))


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
    span = (
        lakehouse.read("producer_events")
        .filter(F.col("run_id") == run_id)
        .agg(F.min("ts").alias("start"), F.max("ts").alias("end"))
        .first()
    )
    if span is None or span.start is None:
        raise InputError(f"run {run_id!r} has no producer events in this lakehouse")
    return span.start, span.end


def _timeline(lakehouse: Lakehouse, run_id: str, start: datetime, end: datetime) -> DataFrame:
    lo, hi = start - BEFORE, end + AFTER
    infra = infra_near(lakehouse.read("infra_events"), start, end).select(
        F.col("corrected_ts").alias("ts"),
        "source",
        "host",
        "event_type",
        F.coalesce("detail", "raw").alias("what"),
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
    merged = infra.unionByName(chaos.toDF(*infra.columns))
    for part in findings:
        merged = merged.unionByName(part.toDF(*infra.columns))
    return merged.filter(F.col("ts").between(lo, hi))


def explain(lakehouse: Lakehouse, run_id: str, finding_id: str | None = None) -> dict[str, Any]:
    """The timeline around one finding (by id prefix) or the whole run, oldest first."""
    finding = _finding(lakehouse, run_id, finding_id) if finding_id else None
    start, end = (finding["start"], finding["end"]) if finding else _run_window(lakehouse, run_id)
    timeline = _timeline(lakehouse, run_id, start, end)
    rows = [r.asDict() for r in timeline.orderBy("ts", "source", "host").limit(MAX_LINES).collect()]
    return {"run_id": run_id, "finding": finding, "start": start, "end": end, "timeline": rows}
