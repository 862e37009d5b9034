"""Micro-outages: a windowed in-flight count per (run, topic, partition, producer)."""

from __future__ import annotations

import hashlib

from pipeline_events import PIPELINE, T0, ack, at, bronze, nack, send

from pipelines.detect_outages import detect_outages
from pulsar_audit.schemas import OUTAGES


def _outages(spark, events: list[dict]) -> list[tuple]:
    rows = detect_outages(bronze(spark, events).producer_events, PIPELINE).collect()
    return sorted(
        (r.producer, r.start, r.end, r.duration_ms, r.in_flight, r.backoff_step) for r in rows
    )


def test_no_events_no_outages(spark):
    found = detect_outages(bronze(spark, []).producer_events, PIPELINE)
    assert found.schema.simpleString() == OUTAGES.simpleString()
    assert found.count() == 0


def test_outage_runs_from_the_first_send_to_the_next_completion(spark):
    events = [send(1, 0), send(2, 10), ack(1, 720), ack(2, 725), send(3, 1000), ack(3, 1005)]
    rows = detect_outages(bronze(spark, events).producer_events, PIPELINE).collect()
    assert [(r.start, r.end, r.duration_ms, r.in_flight, r.backoff_step) for r in rows] == [
        (at(0), at(720), 720.0, 2, 3)
    ]
    row = rows[0]
    assert row.explanation == (
        "producer p1 had 2 message(s) in flight and none completed for 720.0 ms — as long as "
        "step 3 (700 ms) of the client's reconnect backoff; what stopped the completions is "
        "unknown unless a cause is listed"
    )
    key = "\x01".join(["r1", "t", "-1", "p1", str(round(T0.timestamp() * 1_000_000))])
    assert row.outage_id == hashlib.sha256(key.encode()).hexdigest()
    assert row.causes == []


def test_a_stretch_starts_at_the_later_of_last_completion_and_rise_from_zero(spark):
    events = [send(1, 0), send(2, 1), ack(1, 5), ack(2, 400), send(3, 2000), ack(3, 2150)]
    assert _outages(spark, events) == [
        ("p1", at(5), at(400), 395.0, 1, 2),  # since the completion at 5, not the send at 0
        ("p1", at(2000), at(2150), 150.0, 1, 1),  # since the send at 2000 (idle before)
    ]


def test_each_message_completes_once_and_orphans_do_not_complete(spark):
    events = [
        send(1, 0),
        send(2, 10),
        ack(9, 300),  # never sent: ignored
        ack(2, 500),  # out of send order
        ack(2, 600),  # second ack of 2: ignored
        nack(1, 1200),  # a nack completes too
        send(3, 2000),
        ack(3, 2099),  # 99 ms: under the threshold
        send(4, 3000),
        ack(4, 3100),  # exactly the threshold
        send(5, 4000),
        ack(5, 3999),  # completion stamped before its send: counted right after it
        send(1, 0, producer="p2"),
        ack(1, 250, producer="p2"),  # another producer's completion does not cut p1's stretch
    ]
    assert _outages(spark, events) == [
        ("p1", at(0), at(500), 500.0, 2, 2),  # 500 is as near 300 as 700: the lower step
        ("p1", at(500), at(1200), 700.0, 1, 3),
        ("p1", at(3000), at(3100), 100.0, 1, 1),
        ("p2", at(0), at(250), 250.0, 1, 2),
    ]
