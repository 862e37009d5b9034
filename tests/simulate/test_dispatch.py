"""Shared and Failover subscriptions in the simulator: who gets what, in which order."""

from __future__ import annotations

from pyspark.sql import functions as F

from simulate import dispatch as D
from simulate import truth as T
from simulate.consumers import consumers
from simulate.plan import build_plan
from simulate.scenario import scenario_from

GOT = "stream long, seq long, ledger_id long, entry_id long, pos long, crash_pos long"


def _copies(spark, stored: int, crash: int):  # noqa: ANN001, ANN202
    """`stored` copies of one stream, seq = entry = pos, the leaver disconnecting at `crash`."""
    return spark.range(stored).select(
        F.lit(0).cast("long").alias("stream"),
        F.col("id").alias("seq"),
        F.lit(10).cast("long").alias("ledger_id"),
        F.col("id").alias("entry_id"),
        F.col("id").alias("pos"),
        F.lit(crash).cast("long").alias("crash_pos"),
    )


def _in_order(delivered, consumer: str) -> list[tuple[int, int]]:  # noqa: ANN001
    rows = delivered.filter(F.col("consumer") == consumer).orderBy("slot").collect()
    return [(r.seq, r.redelivery_count) for r in rows]


def test_nothing_stored_nothing_delivered(spark):
    empty = spark.createDataFrame([], GOT)
    assert D.shared_deliveries(empty, "a", "b").count() == 0
    assert D.failover_deliveries(empty, "a", "b").count() == 0


def test_shared_round_robin_then_the_leavers_unacked_go_to_the_other_after_higher_seqs(spark):
    delivered = D.shared_deliveries(_copies(spark, 40, 24), "a", "b")
    assert _in_order(delivered, "b") == [(p, 0) for p in range(1, 24, 2)]
    got = _in_order(delivered, "a")
    again = [s for s, count in got if count == 1]
    assert again == list(range(5, 24, 2))  # b's last UNACKED_WINDOW = 10 deliveries
    assert got.index((5, 1)) == got.index((29, 0)) + 1  # right after a higher seq
    assert [s for s, count in got if count == 0] == [*range(0, 24, 2), *range(24, 40)]
    reordered = T.out_of_order(delivered, "sub-shared").orderBy("seq").collect()
    assert [r.seq for r in reordered] == again  # each one follows a higher seq
    assert {r.kind for r in reordered} == {"out_of_order"}


def test_failover_standby_gets_the_unacked_tail_again_in_order(spark):
    delivered = D.failover_deliveries(_copies(spark, 40, 24), "b", "a")
    assert _in_order(delivered, "a") == [(p, 0) for p in range(24)]
    assert _in_order(delivered, "b") == [
        *[(p, 1) for p in range(14, 24)],
        *[(p, 0) for p in range(24, 40)],
    ]
    assert T.out_of_order(delivered, "sub-failover").count() == 0


def test_out_of_order_counts_only_a_first_receipt_lower_than_the_previous(spark):
    """A run of redelivered messages in ascending seq: only its first is lower than the one
    before; a repeat is no reordering."""
    rows = [(0, s, 10, s, "x", slot, 0) for slot, s in enumerate([1, 5, 2, 3, 6, 3])]
    schema = (
        "stream long, seq long, ledger_id long, entry_id long, consumer string, slot long, "
        "redelivery_count int"
    )
    found = T.out_of_order(spark.createDataFrame(rows, schema), "s").collect()
    assert [(r.stream, r.seq, r.kind, r.subscription) for r in found] == [
        (0, 2, "out_of_order", "s")
    ]


def test_the_two_consumer_subscriptions_read_after_the_others_and_only_when_asked():
    plain = build_plan(scenario_from({"scenario": "control", "run_id": "p"}))
    assert [c.subscription for c in consumers(plain)] == ["reader-1", "sub-1"]
    both = build_plan(
        scenario_from(
            {"scenario": "control", "run_id": "b", "shared_crash": 0.4, "failover_crash": 0.6}
        )
    )
    found = consumers(both)
    assert [(c.subscription, c.members) for c in found[2:]] == [
        ("sub-shared", ("shared-b", "shared-a")),
        ("sub-failover", ("failover-a", "failover-b")),
    ]
    assert [c.crash_fraction for c in found[2:]] == [0.4, 0.6]
