"""Poll skip and non-monotonic send (Jepsen's queue-checker names): tiny literal traces."""

from __future__ import annotations

import random

from pipeline_events import Cases, ack, anomalies, end, receive, send, summary

from pipelines.detect_order import detect_poll_skip, ranked_ids
from pipelines.poll_skip_readers import suspect_readers
from pulsar_audit.schemas import ANOMALIES


def _sent_and_acked(*seqs: int) -> list[dict]:
    return [e for s in seqs for e in (send(s, s), ack(s, s + 0.5))]


CASES = Cases()  # every trace below is a run of one build (the `runs` fixture)
CASES.add(
    "clean_read", [*_sent_and_acked(1, 2, 3), *(receive(s, 10 + s) for s in (1, 2, 3)), end(20)]
)


def test_no_events_and_a_clean_read_have_neither(no_events, runs):
    _, empty = no_events
    assert anomalies(empty, "poll_skip", "nonmonotonic_send") == []
    _, gold = runs["clean_read"]
    assert anomalies(gold, "poll_skip", "nonmonotonic_send") == []
    assert (summary(gold)["s1"]["poll_skip"], summary(gold)["s1"]["nonmonotonic_send"]) == (0, 0)


@CASES.case
def jump_got_later_or_never() -> list[dict]:
    later = [receive(1, 10), receive(4, 11), receive(2, 12), receive(3, 13), end(20)]
    never = [receive(s, 10 + s, consumer="c2", subscription="s2") for s in (1, 2, 5)]
    never.append(end(20, consumer="c2", subscription="s2"))
    return [*_sent_and_acked(1, 2, 3, 4, 5), *later, *never]


def test_a_jump_over_stored_messages_is_a_poll_skip_whether_got_later_or_never(runs):
    _, gold = runs[jump_got_later_or_never]
    assert anomalies(gold, "poll_skip") == [
        ("s1", -1, "p1", "poll_skip", 2, 3, 2),
        ("s2", -1, "p1", "poll_skip", 3, 4, 2),
    ]
    rows = summary(gold)
    assert (rows["s1"]["poll_skip"], rows["s1"]["valid"]) == (2, "false")
    assert "poll_skip=2" in rows["s1"]["reasons"]
    assert (rows["s2"]["poll_skip"], rows["s2"]["lost"]) == (2, 2)
    explanation = gold.anomalies.filter("kind = 'poll_skip'").orderBy("subscription").first()
    assert explanation.explanation.startswith(
        "2 stored messages (seq 2–3) from producer p1 were skipped by consumer(s) c1"
    )


@CASES.case
def redelivery_going_back() -> list[dict]:
    events = [receive(1, 10), receive(2, 11), receive(1, 12, redelivery_count=1), receive(3, 13)]
    return [*_sent_and_acked(1, 2, 3), *events, end(20)]


def test_a_redelivery_going_back_is_not_a_skip(runs):
    _, gold = runs[redelivery_going_back]
    assert anomalies(gold, "poll_skip") == []


@CASES.case
def shared_splitting_entries() -> list[dict]:
    """c1 and c2 share s1: each jumps over what the other got (no skip); after c2 left, c1
    jumps over 5–6, which nobody got (a skip). c3 alone in s3 jumps over 2 (a skip)."""
    shared = [
        receive(1, 10),
        receive(2, 11, consumer="c2"),
        receive(3, 12),
        receive(4, 13, consumer="c2"),
        receive(4, 14, redelivery_count=1),  # c2 left: its unacked one goes to c1
        receive(7, 15),
        end(20),
        end(20, consumer="c2"),
    ]
    alone = [receive(s, 10 + s, consumer="c3", subscription="s3") for s in (1, 3, 4, 5, 6, 7)]
    alone.append(end(20, consumer="c3", subscription="s3"))
    return [*_sent_and_acked(*range(1, 8)), *shared, *alone]


def test_a_shared_subscription_splitting_the_entries_is_not_a_skip_a_hole_still_is(runs):
    _, gold = runs[shared_splitting_entries]
    assert anomalies(gold, "poll_skip") == [
        ("s1", -1, "p1", "poll_skip", 5, 6, 2),
        ("s3", -1, "p1", "poll_skip", 2, 2, 1),
    ]


@CASES.case
def three_consumers_one_hole() -> list[dict]:
    """c1, c2 and c3 share s1 and split 1–9 between them; 3 reached both c1 and c2, 6–7 nobody.
    c1 (1, 3, 9) and c3 (5, 8) jump over 6–7 within what no other consumer got: skips. c2
    (2, 3, 4) does not reach them: none."""
    got = {"c1": (1, 3, 9), "c2": (2, 3, 4), "c3": (5, 8)}
    reads = [
        receive(
            s,
            10 + s + (0.5 if c == "c2" else 0),
            consumer=c,
            redelivery_count=int(c == "c2" and s == 3),
        )
        for c, seqs in got.items()
        for s in seqs
    ]
    return [*_sent_and_acked(*range(1, 10)), *reads, *(end(30, consumer=c) for c in got)]


def test_a_hole_among_three_sharing_consumers_is_skipped_by_those_that_jump_it(runs):
    _, gold = runs[three_consumers_one_hole]
    assert anomalies(gold, "poll_skip") == [("s1", -1, "p1", "poll_skip", 6, 7, 2)]
    skip = gold.anomalies.filter("kind = 'poll_skip'").first()
    assert "skipped by consumer(s) c1, c3 of subscription s1" in skip.explanation


@CASES.case
def one_subscription_two_partitions() -> list[dict]:
    """c1 reads partition 0, c2 partition 1, both in s1 (a Failover subscription per
    partition): c2 jumping over seq 2 of partition 1 is a skip, c1's clean read is not."""
    events = []
    for partition, consumer in ((0, "c1"), (1, "c2")):
        on = {"partition": partition}
        ledger = 10 + partition
        for s in (1, 2, 3):
            events += [send(s, s, **on), ack(s, s + 0.5, ledger=ledger, **on)]
        got = (1, 2, 3) if partition == 0 else (1, 3)
        events += [receive(s, 10 + s, ledger=ledger, consumer=consumer, **on) for s in got]
        events.append(end(20, consumer=consumer, **on))
    return events


def test_consumers_of_one_subscription_on_different_partitions_are_checked_each_alone(runs):
    _, gold = runs[one_subscription_two_partitions]
    assert anomalies(gold, "poll_skip") == [("s1", 1, "p1", "poll_skip", 2, 2, 1)]


@CASES.case
def later_send_lower_message_id() -> list[dict]:
    """Sent 1, 2, 3; seq 2 was stored before seq 1 (entry 1 < entry 2): the later send got
    the lower MessageId."""
    events = [send(1, 1), send(2, 2), send(3, 3), ack(1, 4, entry=2), ack(2, 5, entry=1)]
    events.append(ack(3, 6, entry=3))
    reads = [receive(2, 11, entry=1), receive(1, 12, entry=2), receive(3, 13)]
    return [*events, *reads, end(20)]


def test_a_later_send_with_a_lower_message_id_is_a_nonmonotonic_send(runs):
    _, gold = runs[later_send_lower_message_id]
    assert anomalies(gold, "nonmonotonic_send") == [(None, -1, "p1", "nonmonotonic_send", 2, 2, 1)]
    row = summary(gold)["s1"]
    assert (row["nonmonotonic_send"], row["valid"]) == (1, "false")
    assert "nonmonotonic_send=1" in row["reasons"]
    explanation = gold.anomalies.filter("kind = 'nonmonotonic_send'").first().explanation
    assert "a message the producer sent earlier (up to 1:2)" in explanation


@CASES.case
def acks_out_of_send_order() -> list[dict]:
    """Issue 26: acks recorded by the client's callbacks with sub-millisecond jitter (a batch's
    members a few microseconds apart, in any order) while each later send got a higher
    MessageId: nothing is wrong."""
    sends = [send(s, 1) for s in range(6)]  # one millisecond: ties broken by seq
    jitter = [0.004, 0.001, 0.003, 0.002, 0.006, 0.005]
    acks = [ack(s, 2 + jitter[s], entry=7, batch_index=s) for s in range(6)]
    reads = [receive(s, 10 + s, entry=7, batch_index=s) for s in range(6)]
    return [*sends, *acks, *reads, end(20)]


def test_acks_arriving_out_of_send_order_are_not_a_nonmonotonic_send(runs):
    _, gold = runs[acks_out_of_send_order]
    assert anomalies(gold, "nonmonotonic_send") == []
    row = summary(gold)["s1"]
    assert (row["nonmonotonic_send"], row["valid"]) == (0, "true")


@CASES.case
def lowest_read_after_a_shared_one() -> list[dict]:
    """c and d share s1; c gets 3 (d got it too), then 1, then 4: its view is 1, 2, 4 (3 is
    not its own), so it jumped over 2, although it never went past a MessageId it had not
    got counting from its first delivery."""
    reads = [
        receive(3, 10, consumer="c"),
        receive(1, 11, consumer="c"),
        receive(4, 12, consumer="c"),
    ]
    return [*_sent_and_acked(1, 2, 3, 4), *reads, receive(3, 13, consumer="d")]


@CASES.case
def a_reader_in_two_subscriptions() -> list[dict]:
    """c reads 1–5 alone in A, then 1 and 4 in B, which it shares with d (who got 5): c's
    view in B is 1–4, and it jumped over 2–3 there."""
    alone = [receive(s, 10 + s, consumer="c", subscription="A") for s in range(1, 6)]
    shared = [receive(s, 20 + s, consumer="c", subscription="B") for s in (1, 4)]
    other = receive(5, 30, consumer="d", subscription="B")
    return [*_sent_and_acked(1, 2, 3, 4, 5), *alone, *shared, other]


@CASES.case
def a_reader_in_two_shared_subscriptions() -> list[dict]:
    """c shares X with d and Y with e on one partition: c's view is 1 in X and 1–3 in Y, where
    it got 3 first: each walk on its own, no skip (a walk across both jumped from 1 to 3)."""
    x = [receive(1, 10, consumer="c", subscription="X")]
    x += [receive(s, 20 + s, consumer="d", subscription="X") for s in (2, 3, 4)]
    y = [
        receive(3, 11, consumer="c", subscription="Y"),
        receive(4, 30, consumer="e", subscription="Y"),
    ]
    return [*_sent_and_acked(1, 2, 3, 4), *x, *y]


@CASES.case
def a_skip_behind_another_shared_subscriptions_walk() -> list[dict]:
    """c got 1–3 in X (d got 4), then 1 and 3 in Y (e got 4): c jumped over 2 in Y, although a
    walk across both had been at 3 already."""
    x = [receive(s, 10 + s, consumer="c", subscription="X") for s in (1, 2, 3)]
    x.append(receive(4, 20, consumer="d", subscription="X"))
    y = [receive(s, 20 + s, consumer="c", subscription="Y") for s in (1, 3)]
    y.append(receive(4, 30, consumer="e", subscription="Y"))
    return [*_sent_and_acked(1, 2, 3, 4), *x, *y]


def test_a_reader_of_two_shared_subscriptions_walks_each_view_apart(runs):
    _, gold = runs[a_reader_in_two_shared_subscriptions]
    assert anomalies(gold, "poll_skip") == []
    _, gold = runs[a_skip_behind_another_shared_subscriptions_walk]
    assert anomalies(gold, "poll_skip") == [("Y", -1, "p1", "poll_skip", 2, 2, 1)]
    for case in (
        a_reader_in_two_shared_subscriptions,
        a_skip_behind_another_shared_subscriptions_walk,
    ):
        _, gold = runs[case]
        assert anomalies(gold, "poll_skip") == _skips_by_definition(case())


def test_a_reader_whose_deliveries_cover_its_range_still_skips_in_its_shared_view(runs):
    _, gold = runs[lowest_read_after_a_shared_one]
    assert anomalies(gold, "poll_skip") == [("s1", -1, "p1", "poll_skip", 2, 2, 1)]
    _, gold = runs[a_reader_in_two_subscriptions]
    assert anomalies(gold, "poll_skip") == [("B", -1, "p1", "poll_skip", 2, 3, 2)]


def test_only_readers_that_may_have_jumped_are_checked_exactly(runs):
    def suspects(case) -> list[tuple]:
        silver, _ = runs[case]
        found = suspect_readers(silver.delivery, ranked_ids(silver.message_history))
        return sorted((s.consumer, s.subscriptions) for s in found)

    assert suspects("clean_read") == []
    assert suspects(jump_got_later_or_never) == [("c1", ["s1"]), ("c2", ["s2"])]
    # each reads past a stored MessageId it did not get: suspects (c2's jumps are not skips)
    assert [c for c, _ in suspects(shared_splitting_entries)] == ["c1", "c2", "c3"]
    assert suspects(a_reader_in_two_subscriptions) == [("c", ["A", "B"])]  # d got one
    # no suspect: no exact check is built, the detector's frame is an empty literal one
    silver, _ = runs["clean_read"]
    clean = detect_poll_skip(silver.message_history, silver.delivery)
    assert clean.columns == ANOMALIES.fieldNames()
    assert clean._jdf.queryExecution().logical().nodeName() == "LocalRelation"  # noqa: SLF001
    assert clean.isEmpty()


# Poll skip against its definition, written out in Python, on random reads: one reader alone,
# two sharing a subscription, a reader named in two subscriptions. The job checks exactly
# only the readers `pipelines.poll_skip_readers` suspects; these runs compare what it finds
# with the definition, on runs with and without skips.
RANDOM_READS = 30


def _random_reads(rng: random.Random) -> list[dict]:
    """Seqs 1..n sent, acked and read: by c1 alone in `alone`; split between c2 and c3 in
    `shared` (some by both, some by neither); sometimes c2 reads the rest in `side` (a reader
    named in two subscriptions: its walk across both can have no hole where its view in
    `shared` has one), and of those runs, the ones of an even n, c3 reads its rest in `side`
    too (two readers each split in two subscriptions of one partition: a walk per view);
    sometimes by c4, alone in `first` and then in `second`."""
    n = rng.randint(4, 12)
    stored = list(range(1, n + 1))
    events = _sent_and_acked(*stored)
    clock = iter(range(10, 10_000))

    def walk(reads: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """`reads` in order, or (two times in three) with a few dropped, swapped or repeated."""
        if rng.random() < 1 / 3:
            return list(reads)
        got = [r for r in reads if rng.random() > 0.15]
        for _ in range(rng.randint(0, 2)):
            if len(got) > 1:
                i = rng.randrange(len(got) - 1)
                got[i], got[i + 1] = got[i + 1], got[i]
        if len(got) > 2 and rng.random() < 0.3:  # one read moved back, several places
            j = rng.randrange(2, len(got))
            got.insert(rng.randrange(j - 1), got.pop(j))
        if got and rng.random() < 0.3:
            got.append(rng.choice(got))
        return got

    def received(reads: list[tuple[int, str]], consumer: str) -> list[dict]:
        seen: set[tuple[int, str]] = set()
        out = []
        for seq, subscription in reads:
            redelivered = int((seq, subscription) in seen)
            out.append(
                receive(
                    seq,
                    next(clock),
                    consumer=consumer,
                    subscription=subscription,
                    redelivery_count=redelivered,
                )
            )
            seen.add((seq, subscription))
        return out

    events += received(walk([(s, "alone") for s in stored]), "c1")
    got: dict[int, tuple[str, ...]] = {
        s: rng.choices([("c2",), ("c3",), ("c2", "c3"), ()], weights=[45, 40, 10, 5])[0]
        for s in stored
    }
    side = rng.random() < 0.4
    in_side = {"c2", "c3"} if side and n % 2 == 0 else {"c2"} if side else set()
    for consumer in ("c2", "c3"):
        mine = [(s, "shared") if consumer in got[s] else (s, "side") for s in stored]
        wanted = [(s, sub) for s, sub in mine if sub == "shared" or consumer in in_side]
        events += received(walk(wanted), consumer)
    if rng.random() < 0.5:
        seqs = walk([(s, "first") for s in stored])
        cut = rng.randint(0, len(seqs))
        events += received(seqs[:cut] + [(s, "second") for s, _ in seqs[cut:]], "c4")
    return events


def _skips_by_definition(events: list[dict]) -> list[tuple]:
    """poll_skip rows (subscription, partition, producer, kind, seq_from, seq_to, count) of a
    one-partition, one-producer trace whose MessageIds are (1, seq, -1), by the definition: a
    reader's delivery past more than the next MessageId of its view (every stored one; where
    several consumers of its subscription read, less those the others got) skips the view's
    MessageIds in between. A reader alone in its subscriptions is one walk across them."""
    received = [e for e in events if e["event"] == "receive"]
    stored = sorted({e["seq"] for e in events if e["event"] in ("ack", "receive")})
    readers: dict[str, set[str]] = {}
    for e in received:
        readers.setdefault(e["subscription"], set()).add(e["client"])
    skipped: dict[str, set[int]] = {}

    def walk(reads: list[dict], view: list[int]) -> None:
        place = {s: i for i, s in enumerate(view)}
        furthest = None
        for e in (e for e in reads if e["seq"] in place):
            at = place[e["seq"]]
            if furthest is not None and at > furthest + 1:
                skipped.setdefault(e["subscription"], set()).update(view[furthest + 1 : at])
            furthest = at if furthest is None else max(furthest, at)

    for consumer in sorted({e["client"] for e in received}):
        mine = [e for e in received if e["client"] == consumer]
        walk([e for e in mine if len(readers[e["subscription"]]) == 1], stored)
        for subscription in sorted({e["subscription"] for e in mine}):
            if len(readers[subscription]) > 1:
                others = {
                    e["seq"]
                    for e in received
                    if e["subscription"] == subscription and e["client"] != consumer
                }
                view = [s for s in stored if s not in others]
                walk([e for e in mine if e["subscription"] == subscription], view)
    rows = []
    for subscription, seqs in skipped.items():
        ordered = sorted(seqs)
        start = ordered[0]
        for a, b in zip(ordered, [*ordered[1:], None], strict=True):
            if b != a + 1:
                rows.append((subscription, -1, "p1", "poll_skip", start, a, a - start + 1))
                start = b
    return sorted(rows)


for _i in range(RANDOM_READS):
    CASES.add(f"random_reads_{_i}", _random_reads(random.Random(_i)))


def test_poll_skips_of_random_reads_are_those_of_the_definition(runs):
    expected = [_skips_by_definition(_random_reads(random.Random(i))) for i in range(RANDOM_READS)]
    for i, rows in enumerate(expected):
        _, gold = runs[f"random_reads_{i}"]
        assert anomalies(gold, "poll_skip") == rows, f"case {i}"
    with_skips = sum(bool(rows) for rows in expected)
    assert 20 <= with_skips <= RANDOM_READS - 3  # runs with skips and runs without
    subscriptions = {row[0] for rows in expected for row in rows}
    assert subscriptions == {"alone", "shared", "side", "first", "second"}
