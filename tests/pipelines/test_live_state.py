"""pipelines/live_state.py on tiny literal micro-batches: the state a micro-batch leaves is
what is open, and what it derives (closed outages, suspected losses) is what the batch
detectors find over all the events at once."""

from __future__ import annotations

from pipeline_events import PIPELINE, ack, at, bronze, end, folded, receive, send

from pipelines.detect_outages import detect_outages
from pipelines.live import outages_in_progress, suspected_losses
from pipelines.live_state import LiveState, ended


def _rows(df, *columns: str) -> list[tuple]:  # noqa: ANN001
    return sorted(tuple(r[c] for c in columns) for r in df.collect())


def test_nothing_folded_into_nothing_leaves_nothing(spark) -> None:
    nothing = folded(spark, LiveState.empty(spark), [], 0)
    assert [df.count() for df in nothing.state.frames()] == [0] * 6
    assert nothing.closed_outages.count() == 0


def test_an_outage_over_two_micro_batches_is_the_batch_detectors_stretch(spark) -> None:
    first = [send(1, 0), ack(1, 2), send(2, 10), send(3, 20)]
    second = [ack(2, 300), ack(3, 301), send(4, 400)]
    after_first = folded(spark, LiveState.empty(spark), first, 0)

    state = after_first.state
    assert _rows(state.in_flight, "seq") == [(2,), (3,)]
    # the send at 10 took in-flight from 0 to 1, after the last completion at 2
    assert _rows(state.streams, "producer", "in_flight", "last_completion", "last_rise") == [
        ("p1", 2, at(2), at(10))
    ]
    in_progress = outages_in_progress(state.streams, state.runs.select("run_id", "now"), 10)
    assert _rows(in_progress, "kind", "started_at") == [("outage_in_progress", at(10))]
    assert after_first.closed_outages.count() == 0

    after_second = folded(spark, state, second, 1)

    whole = detect_outages(bronze(spark, first + second).producer_events, PIPELINE)
    columns = ("outage_id", "start", "end", "duration_ms", "in_flight", "explanation")
    assert _rows(after_second.closed_outages, *columns) == _rows(whole, *columns)
    assert _rows(whole, "duration_ms") == [(290.0,)]
    # seq 4 is in flight, from a new rise: the outage that ended is not open any more
    assert _rows(after_second.state.streams, "in_flight", "last_rise") == [(1, at(400))]
    assert _rows(after_second.state.in_flight, "seq") == [(4,)]


def test_a_message_acked_and_not_delivered_is_awaited_until_it_arrives(spark) -> None:
    first = [
        send(1, 0),
        ack(1, 2),
        send(2, 10),
        ack(2, 12),
        send(3, 20),
        receive(1, 5),
        receive(3, 25),  # before its ack: not awaited once acked
    ]
    state = folded(spark, LiveState.empty(spark), first, 0).state
    assert _rows(state.in_flight, "seq", "delivered_to") == [(3, ["s1"])]
    assert _rows(state.awaiting, "subscription", "seq", "passed_at") == [("s1", 2, at(25))]
    assert _rows(state.frontier, "subscription", "max_seq", "max_seq_ts") == [("s1", 3, at(25))]

    state = folded(spark, state, [ack(3, 30), send(4, 1024)], 1).state
    assert _rows(state.awaiting, "seq") == [(2,)]  # seq 3 reached s1 before its ack
    clock = state.runs.select("run_id", "now")
    # s1 has had seq 3 for 999 ms at 1024: not yet suspected at 1000 ms, suspected at 999
    assert suspected_losses(state.awaiting, clock, 1000).count() == 0
    [loss] = suspected_losses(state.awaiting, clock, 999).collect()
    assert (loss.kind, loss.subscription, loss.seq_from, loss.seq_to, loss.started_at) == (
        "suspected_loss",
        "s1",
        2,
        2,
        at(10),
    )

    state = folded(spark, state, [receive(2, 1100), end(1200)], 2).state
    assert state.awaiting.count() == 0
    assert _rows(ended(state.consumers), "run_id", "subscription", "all_ended") == [
        ("r1", "s1", True)
    ]
    assert _rows(state.runs, "run_id", "now", "folded_batch") == [("r1", at(1200), 2)]
