"""jobs/live_state.py:fold_batch on real Delta with tiny literal micro-batches: the state
tables it writes from its packed checkpoint, and the findings, closed outages and ended runs
it brings back in one collect, are what the batch detectors say; a micro-batch replayed after
its state was written is judged, not folded twice. (Default suite: no streaming query.)"""

from __future__ import annotations

from pipeline_events import PIPELINE, ack, bronze, end, receive, send, subscribe
from pyspark.sql import functions as F

from jobs.live_state import fold_batch, judge
from pipelines.detect_outages import detect_outages

# an outage from the send at 10 (after the completion at 2) to the ack at 300
FIRST = [subscribe(0), send(1, 0), ack(1, 2), receive(1, 3), send(2, 10), send(3, 20)]
FIRST += [send(4, 250)]  # the run's clock at 250: 240 ms without a completion
SECOND = [ack(2, 300), ack(3, 301), ack(4, 302)]
SECOND += [receive(2, 303), receive(3, 304), receive(4, 305), end(400)]


def _land(lakehouse, events: list[dict], source_file: str, batch: int) -> None:  # noqa: ANN001
    rows = bronze(lakehouse.spark, events, ingest_id=f"i{batch}")
    for table, df in (
        ("producer_events", rows.producer_events),
        ("consumer_events", rows.consumer_events),
    ):
        lakehouse.append(table, df.withColumn("source_file", F.lit(source_file)))


def _seqs(lakehouse, table: str) -> list[int]:  # noqa: ANN001
    return sorted(r["seq"] for r in lakehouse.read(table).collect())


def test_two_micro_batches_then_a_replay(lakehouse, config) -> None:  # noqa: ANN001
    lakehouse.create_all()
    _land(lakehouse, FIRST, "chunk-1", 0)

    first = fold_batch(lakehouse, config, ["chunk-1"], ["r1"], 0)

    assert (first.runs, first.ended, first.closed) == (["r1"], [], [])
    assert [(r["kind"], r["first_seen_batch"]) for r in first.found] == [("outage_in_progress", 0)]
    assert _seqs(lakehouse, "live_in_flight") == [2, 3, 4]
    streams = lakehouse.read("live_streams").collect()
    assert [(r["in_flight"], r["last_rise"]) for r in streams] == [(3, FIRST[4]["ts"])]

    _land(lakehouse, SECOND, "chunk-2", 1)
    second = fold_batch(lakehouse, config, ["chunk-2"], ["r1"], 1)

    whole = bronze(lakehouse.spark, FIRST + SECOND).producer_events
    [batch_outage] = detect_outages(whole, PIPELINE).collect()
    [closed] = second.closed
    assert (closed["outage_id"], closed["duration_ms"]) == (
        batch_outage["outage_id"],
        batch_outage["duration_ms"],
    )
    assert second.ended == ["r1"]
    assert second.found == []  # nothing in flight, nothing awaited any more
    assert lakehouse.read("live_in_flight").count() == 0
    assert lakehouse.read("live_awaiting").count() == 0
    assert [(r["run_id"], r["folded_batch"]) for r in lakehouse.read("live_runs").collect()] == [
        ("r1", 1)
    ]

    replayed = fold_batch(lakehouse, config, ["chunk-2"], ["r1"], 1)

    assert (replayed.ended, replayed.closed, replayed.found) == (["r1"], [], [])
    assert lakehouse.read("live_runs").first()["folded_batch"] == 1


def test_an_outage_begun_and_ended_inside_one_micro_batch_is_raised_confirmed(
    lakehouse,
    config,  # noqa: ANN001
) -> None:
    lakehouse.create_all()
    events = [subscribe(0), send(1, 0), ack(1, 2), receive(1, 3), send(2, 10), ack(2, 300)]
    events += [receive(2, 301), send(3, 310)]  # still going: not ended
    _land(lakehouse, events, "chunk-1", 0)

    judged = fold_batch(lakehouse, config, ["chunk-1"], ["r1"], 0)
    judge(lakehouse, judged, 0)
    judge(lakehouse, judged, 0)  # a micro-batch judged again: still one row

    [batch_outage] = detect_outages(
        bronze(lakehouse.spark, events).producer_events, PIPELINE
    ).collect()
    rows = lakehouse.read("provisional").collect()
    assert [(r["kind"], r["state"], r["resolved_by"], r["duration_ms"]) for r in rows] == [
        ("outage_in_progress", "confirmed", batch_outage["outage_id"], batch_outage["duration_ms"])
    ]
