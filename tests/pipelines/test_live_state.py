"""pipelines/live_state.py on tiny literal micro-batches: the state a micro-batch leaves is
what is open, and what it derives (closed outages, suspected losses) is what the batch
detectors find over all the events at once."""

from __future__ import annotations

from pipeline_events import (
    PIPELINE,
    MicroBatches,
    ack,
    at,
    bronze,
    end,
    receive,
    send,
    subscribe,
)

from pipelines.detect_outages import detect_outages
from pipelines.live import outages_in_progress, suspected_losses
from pipelines.live_state import STATE_TABLES, LiveState, ended, fold
from pipelines.silver import build_delivery, resolve_receives
from pulsar_audit.spark import side_by_side

# every case below is a run of the same micro-batch sequence, folded once (the `folds` fixture)
MICRO_BATCHES = MicroBatches()


def _rows(df, *columns: str) -> list[tuple]:  # noqa: ANN001
    return sorted(tuple(r[c] for c in columns) for r in df.collect())


def test_nothing_folded_into_nothing_leaves_nothing(nothing_folded) -> None:  # noqa: ANN001
    assert [df.count() for df in nothing_folded.state.frames()] == [0] * 6
    assert nothing_folded.closed_outages.count() == 0


OVER_TWO = MICRO_BATCHES.add(
    "over_two",
    [send(1, 0), ack(1, 2), send(2, 10), send(3, 20)],
    [ack(2, 300), ack(3, 301), send(4, 400)],
)


def test_an_outage_over_two_micro_batches_is_the_batch_detectors_stretch(spark, folds) -> None:  # noqa: ANN001
    after_first = folds(0, OVER_TWO)

    state = after_first.state
    assert _rows(state.in_flight, "seq") == [(2,), (3,)]
    # the send at 10 took in-flight from 0 to 1, after the last completion at 2
    assert _rows(state.streams, "producer", "in_flight", "last_completion", "last_rise") == [
        ("p1", 2, at(2), at(10))
    ]
    in_progress = outages_in_progress(state.streams, state.runs.select("run_id", "now"), 10)
    assert _rows(in_progress, "kind", "started_at") == [("outage_in_progress", at(10))]
    assert after_first.closed_outages.count() == 0

    after_second = folds(1, OVER_TWO)

    whole = detect_outages(bronze(spark, MICRO_BATCHES.events(OVER_TWO)).producer_events, PIPELINE)
    columns = ("outage_id", "start", "end", "duration_ms", "in_flight", "explanation")
    assert _rows(after_second.closed_outages, *columns) == _rows(whole, *columns)
    assert _rows(whole, "duration_ms") == [(290.0,)]
    # seq 4 is in flight, from a new rise: the outage that ended is not open any more
    assert _rows(after_second.state.streams, "in_flight", "last_rise") == [(1, at(400))]
    assert _rows(after_second.state.in_flight, "seq") == [(4,)]


AWAITED = MICRO_BATCHES.add(
    "awaited",
    [
        send(1, 0),
        ack(1, 2),
        send(2, 10),
        ack(2, 12),
        send(3, 20),
        receive(1, 5),
        receive(3, 25),  # before its ack: not awaited once acked
    ],
    [ack(3, 30), send(4, 1024)],
    [receive(2, 1100), end(1200)],
)


def test_a_message_acked_and_not_delivered_is_awaited_until_it_arrives(folds) -> None:  # noqa: ANN001
    state = folds(0, AWAITED).state
    assert _rows(state.in_flight, "seq", "delivered_to") == [(3, ["s1"])]
    assert _rows(state.awaiting, "subscription", "seq", "passed_at") == [("s1", 2, at(25))]
    assert _rows(state.frontier, "subscription", "max_seq", "max_seq_ts") == [("s1", 3, at(25))]

    state = folds(1, AWAITED).state
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

    state = folds(2, AWAITED).state
    assert state.awaiting.count() == 0
    # seq 2's delivery came after its ack: nothing is kept of it; seq 4 is still in flight
    assert _rows(state.in_flight, "seq") == [(4,)]
    assert _rows(ended(state.consumers), "run_id", "subscription", "all_ended") == [
        (AWAITED, "s1", True)
    ]
    assert _rows(state.runs, "run_id", "now", "folded_batch") == [(AWAITED, at(1200), 2)]


# The consumer's file with the receive of seq 1 and 2 lands a micro-batch before the
# producer's with their sends and acks (each client rolls its own files): the deliveries are
# kept until the sends come, so the acked messages are not awaited.
DELIVERED_FIRST = MICRO_BATCHES.add(
    "delivered_first",
    [receive(1, 5), receive(2, 15)],
    [send(1, 0), ack(1, 2), send(2, 10), ack(2, 12), send(3, 20), ack(3, 22), send(4, 1500)],
)


def test_a_delivery_folded_before_its_send_is_not_awaited_once_the_send_comes(folds) -> None:  # noqa: ANN001
    state = folds(0, DELIVERED_FIRST).state
    # known as delivered, not yet as sent: kept, and counted in flight by no producer
    assert _rows(state.in_flight, "seq", "sent_at", "delivered_to") == [
        (1, None, ["s1"]),
        (2, None, ["s1"]),
    ]
    assert state.streams.count() == 0

    state = folds(1, DELIVERED_FIRST).state
    # seq 3 is awaited (acked, not delivered); seq 1 and 2 are not: s1 got them already
    assert _rows(state.awaiting, "subscription", "seq") == [("s1", 3)]
    assert _rows(state.in_flight, "seq") == [(4,)]
    assert _rows(state.streams, "in_flight", "sent_upto", "seen_until") == [(1, 4, at(1500))]
    clock = state.runs.select("run_id", "now")
    assert _rows(suspected_losses(state.awaiting, clock, 0), "seq_from", "seq_to") == []


# The reader starts after the producer is done (a chaos run that verifies after producing):
# its subscription is first seen in the micro-batch after every ack. It awaits what it has
# not got of them, as the batch detectors expect every subscription to get every acked message.
SUBSCRIBED_LATE = MICRO_BATCHES.add(
    "subscribed_late",
    [send(s, s * 10) for s in range(1, 6)] + [ack(s, s * 10 + 2) for s in range(1, 6)],
    [receive(1, 100), receive(3, 110), receive(5, 105)],
    [receive(2, 1200), receive(4, 1210)],
)


def test_a_subscription_first_seen_after_the_acks_awaits_what_it_has_not_got(folds) -> None:  # noqa: ANN001
    assert folds(0, SUBSCRIBED_LATE).state.awaiting.count() == 0  # no subscription yet

    state = folds(1, SUBSCRIBED_LATE).state
    # seq 2 and 4 were acked before s1 was seen; each passed by the earliest delivery of a
    # higher seq (seq 5's at 105, before seq 3's at 110)
    assert _rows(state.awaiting, "subscription", "seq", "first_ts", "ack_ts", "passed_at") == [
        ("s1", 2, at(20), at(22), at(105)),
        ("s1", 4, at(40), at(42), at(105)),
    ]
    clock = state.runs.select("run_id", "now")
    # two blocks: seq 3 came between them
    losses = suspected_losses(state.awaiting, clock, 1)
    assert _rows(losses, "kind", "subscription", "seq_from", "seq_to") == [
        ("suspected_loss", "s1", 2, 2),
        ("suspected_loss", "s1", 4, 4),
    ]

    assert folds(2, SUBSCRIBED_LATE).state.awaiting.count() == 0  # both came


# A consumer's last file holds only its `end`, without the subscription: no subscription is
# new (one named after the consumer would be owed every acked message and get none).
END_ALONE = MICRO_BATCHES.add(
    "end_alone",
    [send(1, 0), ack(1, 2), receive(1, 3), send(2, 10), ack(2, 12), receive(2, 13)],
    [end(100, subscription=None)],
)

# s1 is first seen in the micro-batch that sends and acks seq 1 again (a duplicate publish):
# it awaits seq 1 once, as acked now.
ACKED_AGAIN = MICRO_BATCHES.add(
    "acked_again",
    [send(1, 0), ack(1, 2), send(2, 10), ack(2, 12)],
    [send(1, 50), ack(1, 52), receive(2, 60)],
)


def test_an_end_alone_and_a_message_acked_again_owe_nothing_more(folds) -> None:  # noqa: ANN001
    ended_alone = folds(1, END_ALONE).state
    assert ended_alone.awaiting.count() == 0
    # c1 ended, still under s1 (not as a subscription of its own name)
    assert _rows(ended_alone.consumers, "consumer", "subscription", "has_end") == [
        ("c1", "s1", True)
    ]
    awaiting = folds(1, ACKED_AGAIN).state.awaiting
    assert _rows(awaiting, "subscription", "seq", "first_ts", "ack_ts", "passed_at") == [
        ("s1", 1, at(50), at(52), at(60))
    ]


def test_the_fold_hands_its_independent_steps_over_together_and_folds_the_same(spark) -> None:  # noqa: ANN001
    """`fold`'s keep_each gets the steps that do not need one another at once (the
    per-message aggregate, the consumers, the runs' clocks; then the streams and the awaited
    messages), for a caller to keep them side by side (jobs/live_state.py); built and kept
    side by side, the state is the one they give one after the other."""
    events = [subscribe(0), send(1, 0), ack(1, 2), receive(1, 3), send(2, 10), send(3, 20)]
    events += [ack(3, 30)]  # acked, not delivered: awaited
    batch = bronze(spark, [{**e, "run_id": "together"} for e in events], ingest_id="i0")
    producer, consumer = batch.producer_events, batch.consumer_events
    delivery = build_delivery(resolve_receives(consumer, producer))
    groups: list[int] = []

    def keep_each(builds):  # noqa: ANN001, ANN202
        groups.append(len(builds))
        return side_by_side(*builds)

    empty = LiveState.empty(spark)
    together = fold(empty, producer, delivery, consumer, PIPELINE, 0, keep_each=keep_each)
    alone = fold(empty, producer, delivery, consumer, PIPELINE, 0)

    assert groups == [3, 2]
    assert _rows(together.state.in_flight, "seq") == [(2,)]
    assert _rows(together.state.awaiting, "subscription", "seq") == [("s1", 3)]
    for name, mine, theirs in zip(
        STATE_TABLES, together.state.frames(), alone.state.frames(), strict=True
    ):
        assert sorted(map(str, mine.collect())) == sorted(map(str, theirs.collect())), name
