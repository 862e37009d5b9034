"""The job on a real Delta lakehouse: incremental by fingerprint, idempotent on re-runs."""

from __future__ import annotations

import pytest
from pipeline_events import ack, at, bronze, end, receive, send
from pyspark.sql import functions as F

from pipelines.runs_job import run_pipeline
from pulsar_audit.delta_io import Lakehouse
from serve.summary import anomaly_rows, summary_report

GOLD = ("anomalies", "outages", "run_summary")


def _events(run_id: str) -> list[dict]:
    sent = [e for s in (1, 2, 3) for e in (send(s, s, run_id=run_id),)]
    acked = [ack(1, 2, run_id=run_id), ack(2, 450, run_id=run_id), ack(3, 451, run_id=run_id)]
    delivered = [receive(1, 500, run_id=run_id), receive(3, 501, run_id=run_id)]
    return [*sent, *acked, *delivered, end(600, run_id=run_id)]


def _ingest(spark, lakehouse: Lakehouse, events: list[dict], ingest_id: str) -> None:
    """Write events to bronze as the ingest does: the events, and which runs each file holds."""
    data = bronze(spark, events, ingest_id=ingest_id)
    for table, df in (
        ("producer_events", data.producer_events),
        ("consumer_events", data.consumer_events),
    ):
        lakehouse.append(table, df)
        held = df.groupBy("run_id").agg(F.count(F.lit(1)).alias("rows"))
        lakehouse.append(
            "run_files",
            held.select(
                "run_id",
                F.lit(table).alias("table"),
                F.lit(f"{ingest_id}.jsonl").alias("source_file"),
                "rows",
                F.lit(ingest_id).alias("ingest_id"),
                F.current_timestamp().alias("ingested_at"),
            ),
        )


def _snapshot(lakehouse: Lakehouse) -> dict[str, list]:
    return {t: sorted(map(tuple, lakehouse.read(t).collect()), key=repr) for t in GOLD}


# long tier; in the default run: tests/e2e/test_analyze_e2e.py (every anomaly, twice identically)
@pytest.mark.long
def test_run_pipeline_twice_gives_identical_gold(spark, lakehouse: Lakehouse, config):
    _ingest(spark, lakehouse, [*_events("r1"), *_events("r2")], "i1")
    assert run_pipeline(lakehouse, config) == ["r1", "r2"]
    first = _snapshot(lakehouse)
    # gold.anomalies is written after every other table of the recomputation, so that its
    # version names a finished one (`message --as-of VERSION`)
    last = {t: lakehouse.commits(t)[-1][1] for t in (*GOLD, "message_history", "delivery")}
    assert all(ts <= last["anomalies"] for ts in last.values()), last
    assert run_pipeline(lakehouse, config) == []
    assert run_pipeline(lakehouse, config, run_ids=["r1"]) == ["r1"]
    assert _snapshot(lakehouse) == first

    report = summary_report(lakehouse)
    assert [(r["run_id"], r["lost"], r["received"], r["valid"]) for r in report["runs"]] == [
        ("r1", 1, 2, False),
        ("r2", 1, 2, False),
    ]
    outage = report["outages"][0]
    assert len(outage.pop("outage_id")) == 64  # sha2 of the natural key
    assert outage == {
        "run_id": "r1",
        "topic": "t",
        "partition": -1,
        "producer": "p1",
        "start": at(2),
        "end": at(450),
        "duration_ms": 448.0,
        "backoff_step": 2,
        "causes": [],
    }
    # 1 then 3: seq 2 is stored (acked) but skipped, so also a poll skip
    assert [a["kind"] for a in anomaly_rows(lakehouse, ["r2"])] == ["lost", "poll_skip"]


def test_only_changed_runs_are_recomputed(spark, lakehouse: Lakehouse, config):
    _ingest(spark, lakehouse, [*_events("r1"), *_events("r2")], "i1")
    run_pipeline(lakehouse, config)
    r1_before = [r for r in _snapshot(lakehouse)["run_summary"] if r[0] == "r1"]
    _ingest(spark, lakehouse, [receive(2, 500.5, run_id="r2")], "i2")
    assert run_pipeline(lakehouse, config) == ["r2"]
    after = _snapshot(lakehouse)["run_summary"]
    assert [r for r in after if r[0] == "r1"] == r1_before
    r2 = summary_report(lakehouse, ["r2"])["runs"]
    assert [(r["lost"], r["received"], r["valid"]) for r in r2] == [(0, 3, True)]
