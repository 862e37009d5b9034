"""The detectors and the verdict: one tiny literal trace per definition of issue 4."""

from __future__ import annotations

import pytest
from pipeline_events import (
    Cases,
    ack,
    anomalies,
    at,
    config,
    end,
    failed_check,
    nack,
    receive,
    send,
    summary,
)
from pyspark.sql import functions as F

from pulsar_audit.schemas import ANOMALIES, RUN_SUMMARY


def _sent_and_acked(
    *seqs: int, producer: str = "p1", partition: int = -1, ledger: int = 1
) -> list[dict]:
    kw = {"producer": producer, "partition": partition}
    return [e for s in seqs for e in (send(s, s, **kw), ack(s, s + 0.5, ledger=ledger, **kw))]


CASES = Cases()  # every trace below is a run of one build (the `runs` fixture)


def test_no_events_no_anomalies_and_an_empty_summary(no_events):
    _, gold = no_events
    assert gold.anomalies.schema.simpleString() == ANOMALIES.simpleString()
    assert gold.run_summary.schema.simpleString() == RUN_SUMMARY.simpleString()
    assert (gold.anomalies.count(), gold.run_summary.count()) == (0, 0)


@CASES.case
def lost_or_unseen() -> list[dict]:
    return [
        *_sent_and_acked(1, 2, 3, 4, 5, 6),
        receive(1, 10),
        receive(4, 11),
        end(20, subscription=None),  # takes c1's subscription from its receives
        receive(1, 10, consumer="c2", subscription="s2"),
        end(20, consumer="c3", subscription="s3"),  # read to the end, received nothing
    ]


def test_lost_needs_every_consumer_to_end_otherwise_unseen(runs):
    _, gold = runs[lost_or_unseen]
    assert anomalies(gold, "lost", "unseen") == [
        ("s1", -1, "p1", "lost", 2, 3, 2),
        ("s1", -1, "p1", "lost", 5, 6, 2),
        ("s2", -1, "p1", "unseen", 2, 6, 5),
        ("s3", -1, "p1", "lost", 1, 6, 6),
    ]
    rows = summary(gold)
    got = {s: (r["received"], r["lost"], r["unseen"], r["valid"]) for s, r in rows.items()}
    assert got == {
        "s1": (2, 4, 0, "false"),
        "s2": (1, 0, 5, "unknown"),
        "s3": (0, 6, 0, "false"),
    }
    assert rows["s1"]["reasons"] == ["lost=4", "poll_skip=2"]  # 1 then 4: a jump over 2–3
    assert rows["s2"]["reasons"] == ["consumer c2 has no end event"]
    missing = gold.anomalies.filter(F.col("kind").isin("lost", "unseen")).collect()
    explanations = {(r.subscription, r.seq_from): r.explanation for r in missing}
    assert explanations[("s1", 2)] == (
        "2 acked messages (seq 2–3) from producer p1 were never delivered to subscription s1, "
        "although every consumer read to the end of the topic"
    )
    assert explanations[("s2", 2)].startswith(
        "5 acked messages (seq 2–6) from producer p1 were not delivered to subscription s2, "
        "but consumer(s) c2 did not read to the end of the topic"
    )


@CASES.case
def repeat_and_reorder() -> list[dict]:
    repeat = [receive(s, 10 + i) for i, s in enumerate([1, 2, 3])]
    repeat += [receive(2, 14, redelivery_count=1), receive(4, 15), end(20)]
    reorder = [receive(s, 10 + i, consumer="c2", subscription="s2") for i, s in enumerate([1, 4])]
    reorder += [receive(s, 12 + i, consumer="c2", subscription="s2") for i, s in enumerate([4, 2])]
    reorder += [receive(3, 14, consumer="c2", subscription="s2"), end(20, consumer="c2")]
    return [*_sent_and_acked(1, 2, 3, 4), *repeat, *reorder]


def test_repeat_is_a_redelivery_and_reorder_is_out_of_order(runs):
    _, gold = runs[repeat_and_reorder]
    assert anomalies(gold) == [
        ("s1", -1, "p1", "redelivered", 2, 2, 1),
        ("s2", -1, "p1", "out_of_order", 2, 2, 1),  # 3 comes after 2: lower than 4, not than 2
        ("s2", -1, "p1", "poll_skip", 2, 3, 2),  # 1 then 4: jumped over 2–3, got them later
        ("s2", -1, "p1", "redelivered", 4, 4, 1),
    ]
    rows = summary(gold)
    s1, s2 = rows["s1"], rows["s2"]
    assert (s1["redelivered"], s1["out_of_order"], s1["duplicated"], s1["valid"]) == (
        1,
        0,
        0,
        "true",
    )
    assert (s2["redelivered"], s2["out_of_order"], s2["valid"]) == (1, 1, "false")
    assert s2["reasons"] == ["out_of_order=1", "poll_skip=2"]
    # A skip's time is the receive that jumped the hole (4 at 11), where its cause lies.
    skip = gold.anomalies.filter("kind = 'poll_skip'").first()
    assert (skip.first_ts, skip.last_ts) == (at(11), at(11))


def _block_duplicated(deduplication: bool) -> list[dict]:
    first_copies = [receive(10, 20, ledger=12, entry=5), receive(11, 21, ledger=12, entry=6)]
    retried = [ack(s, 30 + s, ledger=14, entry=s - 10) for s in (10, 11, 12)]
    second_copies = [receive(s, 40 + s, ledger=14, entry=s - 10) for s in (10, 11, 12)]
    events = [config(deduplication), *[send(s, s) for s in (10, 11, 12)], *retried]
    return [*events, *first_copies, *second_copies, end(99)]


for _dedup in (False, True):
    CASES.add(f"block_duplicated_dedup_{_dedup}", _block_duplicated(_dedup))


@pytest.mark.parametrize("deduplication", [False, True])
def test_block_duplicated_across_a_ledger_boundary(runs, deduplication):
    _, gold = runs[f"block_duplicated_dedup_{deduplication}"]
    assert anomalies(gold) == [("s1", -1, "p1", "duplicated", 10, 11, 2)]
    why = (
        "although deduplication is on for this run; why it did not drop the second copy is "
        "unknown unless a cause is listed"
        if deduplication
        else "deduplication is off for this run, so each send of the same message is stored; "
        "why the producer sent it again is unknown unless a cause is listed"
    )
    assert "failover" not in gold.anomalies.first().explanation
    # The block's time is when it was written twice (first send to last ack), where the cause
    # of the resend lies; not when it was read.
    block = gold.anomalies.first()
    assert (block.first_ts, block.last_ts) == (at(10), at(41))
    assert gold.anomalies.first().explanation == (
        "2 messages (seq 10–11) from producer p1, delivered to subscription s1, were stored "
        "twice: copy 1 at ledger 12 entries 5–6 (0 acked); copy 2 at ledger 14 entries 0–1 "
        f"(2 acked) — {why}"
    )
    row = summary(gold)["s1"]
    assert (row["received"], row["duplicated"], row["redelivered"], row["out_of_order"]) == (
        3,
        2,
        0,
        0,
    )
    assert row["valid"] == ("false" if deduplication else "true")
    assert row["reasons"] == (["duplicated=2 with deduplication on"] if deduplication else [])


@CASES.case
def partitions_producers_consumers() -> list[dict]:
    return [
        *_sent_and_acked(1, 2, producer="p1", partition=0),
        *_sent_and_acked(1, 2, producer="p1", partition=1),
        *_sent_and_acked(1, 2, producer="p2", partition=0, ledger=2),  # stored after p1's
        receive(1, 10, partition=0, producer="p1"),
        receive(2, 11, partition=0, producer="p2", ledger=2),  # p2's stream: 2, then 1
        receive(2, 12, partition=0, producer="p1"),  # 1:2 after 2:2: back across producers
        receive(1, 13, partition=0, producer="p2", ledger=2),
        receive(2, 10, partition=1, producer="p1", consumer="c2"),
        end(20),
        end(20, consumer="c2"),
    ]


def test_partitions_with_several_producers_and_consumers(runs):
    _, gold = runs[partitions_producers_consumers]
    # storage order on partition 0: 1:1 1:2 (p1), 2:1 2:2 (p2); read: 1:1 2:2 1:2 2:1
    assert anomalies(gold) == [
        ("s1", 0, "p1", "nonmonotonic_poll", 2, 2, 1),
        ("s1", 0, "p1", "poll_skip", 2, 2, 1),  # 1:1 then 2:2 jumped over 1:2 and 2:1
        ("s1", 0, "p2", "out_of_order", 1, 1, 1),  # back in its own seq: not also a poll
        ("s1", 0, "p2", "poll_skip", 1, 1, 1),
        ("s1", 1, "p1", "lost", 1, 1, 1),
    ]
    row = summary(gold)["s1"]
    counts = ("sent", "acked", "received", "lost", "out_of_order", "valid", "reasons")
    reasons = ["lost=1", "out_of_order=1", "poll_skip=2", "nonmonotonic_poll=1"]
    assert [row[c] for c in counts] == [6, 6, 5, 1, 1, "false", reasons]
    lost = gold.anomalies.filter("kind = 'lost'").first().explanation
    assert lost.startswith("1 acked message (seq 1) from producer p1 on partition 1 was never")


@CASES.case
def nack_then_late_delivery() -> list[dict]:
    events = [send(1, 0), send(2, 1), ack(1, 2), nack(2, 3), receive(1, 5), receive(2, 6)]
    return [*events, end(9)]


def test_nack_then_late_delivery_is_received_and_unacked_not_lost(runs):
    _, gold = runs[nack_then_late_delivery]
    assert anomalies(gold) == [("s1", -1, "p1", "unacked_received", 2, 2, 1)]
    assert gold.anomalies.first().explanation == (
        "1 message (seq 2) from producer p1 was delivered to subscription s1 but never acked "
        "to the producer (1 nacked) — normal around failures; reported, not a violation"
    )
    row = summary(gold)["s1"]
    counts = ("sent", "acked", "nacked", "received", "lost", "unacked_received", "valid")
    assert [row[c] for c in counts] == [2, 1, 1, 2, 0, 1, "true"]


CASES.add(
    "failed_table_check",
    [*_sent_and_acked(1, 2), receive(1, 5), end(9)],
    checks=[failed_check("orphan_acks")],
)


def test_failed_table_check_makes_the_run_unknown_before_anything_else(runs):
    _, gold = runs["failed_table_check"]
    row = summary(gold)["s1"]
    assert (row["lost"], row["valid"]) == (1, "unknown")
    assert row["reasons"] == ["check failed: orphan_acks", "lost=1"]


CASES.add("topic_without_consumers", _sent_and_acked(1, 2))


def test_topic_without_consumers_is_unknown_not_missing(runs):
    _, gold = runs["topic_without_consumers"]
    row = summary(gold)[""]
    assert (row["acked"], row["unseen"], row["valid"]) == (2, 2, "unknown")
    assert row["reasons"] == ["no consumer of this topic was traced"]
    assert gold.anomalies.first().explanation == (
        "2 acked messages (seq 1–2) from producer p1: no consumer of this topic was traced"
    )
