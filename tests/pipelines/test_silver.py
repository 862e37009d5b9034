"""Silver: delivery order, producer resolution and per-message histories."""

from __future__ import annotations

from pipeline_events import Cases, ack, at, end, nack, receive, send, subscribe, summary

from pulsar_audit.schemas import DELIVERY, MESSAGE_HISTORY

CASES = Cases()  # every trace below is a run of one build (the `runs` fixture)


def test_no_events_give_empty_silver_and_gold(no_events):
    silver, gold = no_events
    assert silver.delivery.schema.simpleString() == DELIVERY.simpleString()
    assert silver.message_history.schema.simpleString() == MESSAGE_HISTORY.simpleString()
    assert silver.delivery.count() == 0
    assert silver.message_history.count() == 0
    assert gold.anomalies.count() == 0
    assert gold.outages.count() == 0
    assert gold.run_summary.count() == 0


@CASES.case
def ts_ties() -> list[dict]:
    return [
        send(1, 0),
        send(2, 0),
        # Same ts; the file lists seq 2 first, but event_index says seq 1 came first.
        receive(2, 5, event_index=1),
        receive(1, 5, event_index=0),
        receive(3, 4, event_index=7, producer="p1"),
    ]


def test_ts_ties_are_resolved_by_event_index(runs):
    silver, _ = runs[ts_ties]
    got = [(r.delivery_index, r.seq) for r in silver.delivery.orderBy("delivery_index").collect()]
    assert got == [(0, 3), (1, 1), (2, 2)]


@CASES.case
def without_event_index() -> list[dict]:
    return [send(7, 0), receive(9, 5), receive(8, 5), receive(7, 1)]


def test_without_event_index_ts_then_line_order_decides(runs):
    silver, _ = runs[without_event_index]
    got = [r.seq for r in silver.delivery.orderBy("delivery_index").collect()]
    assert got == [7, 9, 8]


CASES.add("missing_producer", [send(1, 0), ack(1, 2), receive(1, 3, producer=None), end(9)])


def test_missing_producer_is_filled_when_the_topic_has_one(runs):
    silver, gold = runs["missing_producer"]
    assert [(r.producer, r.seq) for r in silver.delivery.collect()] == [("p1", 1)]
    row = summary(gold)["s1"]
    assert (row["received"], row["lost"], row["unattributed"], row["valid"]) == (1, 0, 0, "true")


@CASES.case
def subscribed_received_nothing() -> list[dict]:
    # r-blocked attached while the bookies were down and read nothing; r-empty read to the end
    # and got nothing; r-all read everything. Without `subscribe`, r-blocked would vanish.
    produced = [send(1, 0), ack(1, 2), send(2, 1), ack(2, 3)]
    blocked = [subscribe(5, consumer="r-blocked", subscription="r-blocked")]
    empty = [subscribe(5, consumer="r-empty", subscription="r-empty"), end(8, "r-empty", None)]
    full = [subscribe(5, "r-all", "r-all"), receive(1, 6, consumer="r-all", subscription="r-all")]
    full += [receive(2, 7, consumer="r-all", subscription="r-all"), end(9, "r-all", "r-all")]
    return [*produced, *blocked, *empty, *full]


def test_a_consumer_that_subscribed_and_received_nothing_still_has_a_verdict(runs):
    _, gold = runs[subscribed_received_nothing]
    rows = {
        sub: (r["received"], r["unseen"], r["lost"], r["valid"]) for sub, r in summary(gold).items()
    }
    assert rows == {
        "r-blocked": (0, 2, 0, "unknown"),
        "r-empty": (0, 0, 2, "false"),
        "r-all": (2, 0, 0, "true"),
    }


@CASES.case
def unresolvable_producer() -> list[dict]:
    return [
        send(1, 0, producer="p1"),
        ack(1, 2, producer="p1"),
        send(1, 0, producer="p2"),
        ack(1, 2, ledger=2, producer="p2"),
        receive(1, 3, producer=None),
        receive(1, 4, ledger=2, producer="p2"),
        end(9),
    ]


def test_unresolvable_producer_is_counted_not_dropped(runs):
    silver, gold = runs[unresolvable_producer]
    assert [(r.producer, r.seq) for r in silver.delivery.collect()] == [("p2", 1)]
    row = summary(gold)["s1"]
    assert (row["unattributed"], row["lost"], row["received"]) == (1, 1, 1)
    # The unattributed receive may well be p1's message: lost is counted, but so is the doubt.
    assert row["valid"] == "false"
    assert row["reasons"] == [
        "lost=1",
        "unattributed=1: receives without a producer on a topic with several producers",
    ]


@CASES.case
def send_ack_copies_deliveries() -> list[dict]:
    return [
        send(1, 0),
        ack(1, 2.5, ledger=7, entry=3),
        nack(2, 1),
        receive(1, 3, ledger=7, entry=3, consumer="c1", subscription="s1"),
        receive(1, 4, ledger=8, entry=0, consumer="c1", subscription="s1"),
        receive(1, 6, ledger=7, entry=3, consumer="c2", subscription="s2"),
    ]


def test_message_history_holds_send_ack_copies_and_deliveries(runs):
    silver, _ = runs[send_ack_copies_deliveries]
    rows = {r.seq: r for r in silver.message_history.collect()}
    one = rows[1]
    assert (one.sent, one.acked, one.nacked, one.ack_latency_ms) == (True, True, False, 2.5)
    assert one.send_ts == at(0) and one.ack_ts == at(2.5)
    assert tuple(one.ack_id) == (7, 3, -1)
    assert [tuple(c) for c in one.copies] == [(7, 3, -1), (8, 0, -1)]
    assert [tuple(s) for s in one.subscriptions] == [
        ("s1", 2, at(3), at(4)),
        ("s2", 1, at(6), at(6)),
    ]
    two = rows[2]
    assert (two.sent, two.acked, two.nacked, two.nack_error) == (
        False,
        False,
        True,
        "TimeoutException",
    )
    assert (two.copies, two.subscriptions) == ([], [])


@CASES.case
def ack_of_minus_one() -> list[dict]:
    # the first send timed out; the broker had stored it at 1:4 and drops the resend (dedup on)
    return [
        send(4, 0),
        nack(4, 30_000),
        send(4, 30_001, event_index=9),
        ack(4, 30_050, ledger=-1, entry=-1),
        receive(4, 40_000, ledger=1, entry=4),
        end(40_001),
    ]


def test_an_ack_of_minus_one_is_not_a_stored_copy(runs):
    silver, gold = runs[ack_of_minus_one]
    (history,) = silver.message_history.collect()
    assert [(c.ledger_id, c.entry_id) for c in history.copies] == [(1, 4)]
    assert summary(gold)["s1"]["duplicated"] == 0
