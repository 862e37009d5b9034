"""Each subscription type judged by its own promises (docs/subscription-types.md): tiny
literal traces, several subscriptions per case, every case a run of one build."""

from __future__ import annotations

from pipeline_events import (
    Cases,
    ack,
    anomalies,
    bronze,
    build,
    end,
    receive,
    send,
    subscribe,
    summary,
)

from pipelines.build import shared_frames
from pipelines.detectors import FAILOVER, KEY_SHARED, SEVERAL_CONSUMERS, TYPED, typed_checks
from pulsar_audit.kinds import SUBSCRIPTION_TYPE_KINDS

NEW_KINDS = SUBSCRIPTION_TYPE_KINDS


def _sent(*seqs: int, keys: dict[int, str] | None = None, ack_ms: float = 0.5) -> list[dict]:
    """Each seq sent at `seq` ms and acked `ack_ms` later (entry = seq), with its key."""
    keyed = lambda s: {"key": keys[s]} if keys else {}  # noqa: E731
    return [e for s in seqs for e in (send(s, s, **keyed(s)), ack(s, s + ack_ms, **keyed(s)))]


def _got(
    sub: str, kind: str, consumer: str, *reads: tuple, keys: dict | None = None, joined: float = 0
) -> list:
    """`consumer` of `sub` (type `kind`) subscribed at `joined` ms, received (seq, ms[,
    redelivery_count]) and ended."""
    events = [subscribe(joined, consumer=consumer, subscription=sub, subscription_type=kind)]
    for seq, ms, *again in reads:
        extra = {"key": keys[seq]} if keys else {}
        if again:
            extra["redelivery_count"] = again[0]
        events.append(
            receive(seq, ms, consumer=consumer, subscription=sub, subscription_type=kind, **extra)
        )
    return [*events, end(100_000, consumer=consumer, subscription=sub)]


CASES = Cases()  # every trace below is a run of one build (the `runs` fixture)
UNTYPED = [*_sent(1, 2), receive(2, 10), receive(1, 11), end(20)]
CASES.add("untyped", UNTYPED)


def test_no_events_and_an_untyped_trace_are_judged_as_before(spark, no_events, runs):
    """The untyped trace alone (no typed detector built) and as a run beside typed ones (all
    built): judged the same, as before subscription types."""
    _, empty = no_events
    assert anomalies(empty) == []
    _, alone = build(spark, UNTYPED)
    for gold in (alone, runs["untyped"][1]):
        assert anomalies(gold, *NEW_KINDS) == []
        assert anomalies(gold, "out_of_order") == [("s1", -1, "p1", "out_of_order", 1, 1, 1)]
        row = summary(gold)["s1"]
        assert (row["subscription_type"], row["valid"]) == (None, "false")
        assert row["unchecked"] == [
            "subscription type not in the trace: order judged per partition, as for Exclusive "
            "and Failover; key order and ownership not checked"
        ]


def test_typed_checks_are_built_only_for_the_types_a_trace_names(spark):
    """Which typed detectors the job builds: none for an empty or untyped trace; Key_Shared's
    only when a Key_Shared subscription's receives carry keys; the overlap check for Failover;
    poll skip's per-consumer views only for a subscription with several consumers."""

    def checks(*events: dict) -> frozenset[str]:
        return typed_checks(shared_frames(bronze(spark, list(events))).subscriptions)

    assert checks() == frozenset()
    assert checks(*_sent(1), receive(1, 10), end(20)) == frozenset()
    assert checks(*_sent(1), *_got("s1", "Shared", "c1", (1, 10))) == {TYPED}
    assert checks(*_sent(1), *_got("s1", "Key_Shared", "c1", (1, 10))) == {TYPED}
    keyed = _got("s1", "Key_Shared", "c1", (1, 10), keys={1: "k"})
    assert checks(*_sent(1, keys={1: "k"}), *keyed) == {TYPED, KEY_SHARED}
    assert checks(*_sent(1), *_got("s1", "Failover", "c1", (1, 10))) == {TYPED, FAILOVER}
    # two consumers of one subscription: poll skip judges what each of them was due
    two = [*_got("s1", "Shared", "c1", (1, 10)), *_got("s1", "Shared", "c2", (2, 11))]
    assert checks(*_sent(1, 2), *two) == {TYPED, SEVERAL_CONSUMERS}
    assert checks(*_sent(1, 2), *_got("s1", "Shared", "c1", (1, 10))) == {TYPED}


@CASES.case
def shared_reordering() -> list[dict]:
    """c1 and c2 share s1: c1 gets 1, 4, then 3 (c2 got 2 and left 3 unacked: redelivered to
    c1 after 4). Shared promises no order: reported as shared_reordered, valid true. s2's
    consumers name two types: its type is unknown, and so is its verdict."""
    return [
        *_sent(1, 2, 3, 4),
        *_got("s1", "Shared", "c1", (1, 10), (4, 13), (3, 14, 1)),
        *_got("s1", "Shared", "c2", (2, 11), (3, 12)),
        *_got("s2", "Shared", "c3", (1, 10), (3, 12)),
        *_got("s2", "Exclusive", "c4", (2, 11), (4, 13)),
    ]


def test_a_shared_subscription_reordering_across_consumers_is_valid(runs):
    _, gold = runs[shared_reordering]
    assert anomalies(gold, "out_of_order", "poll_skip", "nonmonotonic_poll") == []
    assert anomalies(gold, *NEW_KINDS) == [("s1", -1, "p1", "shared_reordered", 3, 3, 1)]
    row = summary(gold)["s1"]
    assert (row["subscription_type"], row["shared_reordered"], row["valid"]) == (
        "Shared",
        1,
        "true",
    )
    assert row["unchecked"] == ["Shared promises no order: reordering is reported, not judged"]
    mixed = summary(gold)["s2"]
    assert (mixed["subscription_type"], mixed["valid"]) == (None, "unknown")
    assert mixed["reasons"] == [
        "the trace names several subscription types (Exclusive, Shared) for one subscription"
    ]
    shared = gold.anomalies.filter("kind = 'shared_reordered'").first().explanation
    assert "Shared promises no order" in shared


@CASES.case
def key_shared() -> list[dict]:
    """s1: key a (1, 3, 5) to c1, key b (2, 4, 6) to c2; c2 gets 6 before 4 (per-key order
    broken); c1 gets 5 before c2 gets 2 (across keys: fine); c1's 3 comes back redelivered
    after 5 (its first receipt was in order). s2: c3 got a's 1 and 5 80 ms apart with c4
    getting a's 3 between them (overlap); c3 and c4 handing over 900 ms apart is no overlap.
    s3: c6 (key b) got nothing for 15 s after s3 began receiving (at 10 ms) while c5 (key a)
    kept receiving: one stall, ended by 2's receipt (4 and 6 followed right after it).
    s4: Key_Shared without keys: unchecked."""
    keys = {1: "a", 2: "b", 3: "a", 4: "b", 5: "a", 6: "b"}
    ordered = [
        *_got("s1", "Key_Shared", "c1", (1, 10), (3, 11), (5, 12), (3, 40, 1), keys=keys),
        *_got("s1", "Key_Shared", "c2", (2, 13), (6, 14), (4, 15), keys=keys),
    ]
    overlap = [
        *_got("s2", "Key_Shared", "c3", (1, 1000), (5, 1080), (6, 3000), keys=keys),
        *_got("s2", "Key_Shared", "c4", (3, 1040), (2, 2000), (4, 2900), keys=keys),
    ]
    stuck = [
        *_got("s3", "Key_Shared", "c5", (1, 10), (3, 20), (5, 30), keys=keys),
        *_got("s3", "Key_Shared", "c6", (2, 15_002), (4, 15_003), (6, 15_004), keys=keys),
    ]
    unkeyed = _got("s4", "Key_Shared", "c7", *[(s, 10 + s) for s in (1, 2, 3, 4, 5, 6)])
    late = [  # s5: as s3, but c9 subscribed only 7 ms before its first receipt: not idle
        *_got("s5", "Key_Shared", "c8", (1, 10), (3, 20), (5, 30), keys=keys),
        *_got("s5", "Key_Shared", "c9", (2, 15_002), (4, 15_003), (6, 15_004), keys=keys,
              joined=14_995),
    ]  # fmt: skip
    return [*_sent(1, 2, 3, 4, 5, 6, keys=keys), *ordered, *overlap, *stuck, *unkeyed, *late]


def test_key_shared_per_key_order_stuck_keys_and_overlap(runs):
    _, gold = runs[key_shared]
    assert anomalies(gold, *NEW_KINDS, "out_of_order", "poll_skip") == [
        ("s1", -1, "p1", "key_out_of_order", 4, 4, 1),
        ("s2", -1, "p1", "key_overlap", 3, 3, 1),
        ("s3", -1, "p1", "stuck_key", 2, 2, 1),
    ]
    rows = summary(gold)
    verdicts = [rows[s]["valid"] for s in ("s1", "s2", "s3", "s4", "s5")]
    assert verdicts == ["false"] * 3 + ["true"] * 2
    assert rows["s1"]["reasons"] == ["key_out_of_order=1"]
    assert rows["s4"]["unchecked"] == [
        "no message keys in the trace: per-key order, key ownership and stuck keys not checked"
    ]
    texts = {(r.kind, r.seq_from): r.explanation for r in gold.anomalies.collect()}
    assert texts[("key_overlap", 3)].startswith(
        "1 delivery (seq 3) from producer p1 went to consumer(s) c4 of Key_Shared subscription "
        "s2 while consumer(s) c3 held key(s) a"
    )
    assert texts[("stuck_key", 2)].startswith(
        "1 message (seq 2) from producer p1 with key(s) b reached consumer(s) c6 of Key_Shared "
        "subscription s3 only after it had got nothing for up to 14992 ms"
    )


@CASES.case
def ordering_key() -> list[dict]:
    """Messages 1 and 2 share ordering key o (keys differ): 2 before 1 breaks per-key order."""
    sends = [send(1, 1, key="x", ordering_key="o"), send(2, 2, key="y", ordering_key="o")]
    acks = [ack(1, 1.5), ack(2, 2.5)]
    kind = {"subscription_type": "Key_Shared"}
    reads = [
        receive(2, 10, key="y", ordering_key="o", **kind),
        receive(1, 11, key="x", ordering_key="o", **kind),
    ]
    return [*sends, *acks, *reads, end(20)]


def test_ordering_key_comes_before_the_key(runs):
    _, gold = runs[ordering_key]
    assert anomalies(gold, *NEW_KINDS) == [("s1", -1, "p1", "key_out_of_order", 1, 1, 1)]


@CASES.case
def failover() -> list[dict]:
    """s1: c2 got 2 between c1's 1 and 3, 90 ms apart: both active. s2: c3 got 1–2, then c4
    took over with 3–4 (c3 gone): no overlap."""
    return [
        *_sent(1, 2, 3, 4),
        *_got("s1", "Failover", "c1", (1, 1000), (3, 1090), (4, 1100)),
        *_got("s1", "Failover", "c2", (2, 1050)),
        *_got("s2", "Failover", "c3", (1, 10), (2, 11)),
        *_got("s2", "Failover", "c4", (3, 500), (4, 501)),
    ]


def test_failover_two_active_consumers_at_once_and_a_clean_takeover(runs):
    _, gold = runs[failover]
    assert anomalies(gold, *NEW_KINDS) == [("s1", -1, "p1", "failover_overlap", 2, 2, 1)]
    rows = summary(gold)
    assert (rows["s1"]["valid"], rows["s2"]["valid"]) == ("false", "true")
    assert (rows["s2"]["poll_skip"], rows["s2"]["unchecked"]) == (0, [])


@CASES.case
def one_message_id_two_messages() -> list[dict]:
    """Seq 1 and 2 acked as 1:5; seq 3 and 4 batched in entry 7, acked without their batch
    index (-1) and delivered with it (0, 1): a batch, not an inconsistency."""
    sends = [send(s, s) for s in (1, 2, 3, 4)]
    acks = [ack(1, 5, entry=5), ack(2, 6, entry=5), ack(3, 7, entry=7), ack(4, 7, entry=7)]
    reads = [
        receive(1, 10, entry=5),
        receive(2, 11, entry=5),
        receive(3, 12, entry=7, batch_index=0),
        receive(4, 13, entry=7, batch_index=1),
    ]
    return [*sends, *acks, *reads, end(20)]


def test_two_messages_under_one_message_id_are_inconsistent(runs):
    _, gold = runs[one_message_id_two_messages]
    assert anomalies(gold, "inconsistent_message_id") == [
        (None, -1, "p1", "inconsistent_message_id", 1, 2, 2)
    ]
    row = summary(gold)["s1"]
    assert (row["inconsistent_message_id"], row["valid"]) == (2, "false")
    text = gold.anomalies.filter("kind = 'inconsistent_message_id'").first().explanation
    assert "(e.g. 1:5:-1, also seq 2 from producer p1)" in text
