"""Message keys, the Key_Shared subscription and the Failover overlap in the simulator: who
gets what, in which order, and the truth of the subscription types' kinds.

Keys of seq 0–9 with keys=3 (xxhash64 of the seq): k0 k1 k0 k0 k0 k2 k1 k1 k2 k0; their
dispatch hashes: k0 6582, k1 54185, k2 50369 (of 65536)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from pulsar_audit.errors import UsageError
from pulsar_audit.kinds import RUN_COUNTS
from simulate import dispatch as D
from simulate import truth as T
from simulate import truth_keys as TK
from simulate.consumers import Consumer, consumers
from simulate.dispatch_keys import key_column, key_hash, key_shared_deliveries
from simulate.key_shared import KeyShared
from simulate.plan import build_plan
from simulate.scenario import scenario_from, validate

GOT = (
    "stream long, seq long, ledger_id long, entry_id long, pos long, stop_pos long, "
    "crash_pos long, join_pos long"
)
KEYS_OF_3 = ["k0", "k1", "k0", "k0", "k0", "k2", "k1", "k1", "k2", "k0"]


def _got(spark, stored: int, crash: int | None = None, join: int | None = None):  # noqa: ANN001, ANN202
    """`stored` copies of one stream, seq = entry = pos; leave at `crash`, join at `join`."""
    rows = [(0, p, 10, p, p, stored, crash or stored, join or stored) for p in range(stored)]
    return spark.createDataFrame(rows, GOT)


def _in_order(delivered, consumer: str) -> list[tuple[int, int]]:  # noqa: ANN001
    rows = delivered.filter(F.col("consumer") == consumer).orderBy("slot").collect()
    return [(r.seq, r.redelivery_count) for r in rows]


def _acked(spark, stored: int):  # noqa: ANN001, ANN202
    """Every message acked 1 ms after the previous one, from t = 0."""
    rows = [(0, s, "ack", 1000 * s) for s in range(stored)]
    return spark.createDataFrame(rows, "stream long, seq long, outcome string, done_us long")


def test_nothing_stored_nothing_delivered(spark):
    empty = spark.createDataFrame([], GOT)
    churn = KeyShared(2, join=0.3, leave=0.6, bug="reorder")
    delivered = key_shared_deliveries(empty, churn, 3)
    assert delivered.count() == 0
    assert D.failover_deliveries(empty, "b", "a", overlap=8).count() == 0
    assert TK.key_out_of_order(delivered, 3, "s").count() == 0
    assert TK.stuck_keys(_acked(spark, 0), delivered, 3, 1, 0, 10_000, "s").count() == 0


def test_keys_are_a_hash_of_the_seq_and_absent_without_keys(spark):
    rows = spark.range(10).select(
        key_column(F.col("id"), 3).alias("key"), key_column(F.col("id"), 0).alias("none")
    )
    assert [r.key for r in rows.collect()] == KEYS_OF_3
    assert {r.none for r in rows.collect()} == {None}
    hashes = spark.createDataFrame([("k0",), ("k1",), ("k2",)], "k string")
    assert [r.h for r in hashes.select(key_hash(F.col("k")).alias("h")).collect()] == [
        6582,
        54185,
        50369,
    ]


def test_auto_split_without_churn_sends_each_key_to_one_consumer(spark):
    # two consumers: hashes [0, 32768) to keyshared-1 (k0), the rest to keyshared-2 (k1, k2)
    delivered = key_shared_deliveries(_got(spark, 10), KeyShared(2), 3)
    assert _in_order(delivered, "keyshared-1") == [(s, 0) for s in (0, 2, 3, 4, 9)]
    assert _in_order(delivered, "keyshared-2") == [(s, 0) for s in (1, 5, 6, 7, 8)]


def test_a_joining_consumer_gets_its_keys_only_after_it_joined(spark):
    # joined at position 4: three consumers, k1 and k2 (above 43690) move to keyshared-3
    delivered = key_shared_deliveries(_got(spark, 10, join=4), KeyShared(2, join=0.4), 3)
    assert _in_order(delivered, "keyshared-3") == [(s, 0) for s in (5, 6, 7, 8)]
    assert _in_order(delivered, "keyshared-2") == [(1, 0)]
    assert _in_order(delivered, "keyshared-1") == [(s, 0) for s in (0, 2, 3, 4, 9)]
    assert TK.key_out_of_order(delivered, 3, "s").count() == 0


def test_a_leavers_unacked_tail_goes_first_to_the_new_owner_of_its_keys(spark):
    delivered = key_shared_deliveries(_got(spark, 10, crash=6), KeyShared(2, leave=0.6), 3)
    assert _in_order(delivered, "keyshared-1") == [(s, 0) for s in (0, 2, 3, 4)]
    assert _in_order(delivered, "keyshared-2") == [
        (1, 0),
        (5, 0),
        *[(s, 1) for s in (0, 2, 3, 4)],  # redelivered, in order, before any newer entry
        *[(s, 0) for s in (6, 7, 8, 9)],
    ]
    assert TK.key_out_of_order(delivered, 3, "s").count() == 0
    assert TK.stuck_keys(_acked(spark, 10), delivered, 3, 1, 60_000_000, 10_000, "s").count() == 0


def test_the_reorder_bug_gives_a_moved_keys_in_flight_entry_after_newer_ones(spark):
    # at the join k1 moves from keyshared-2 to keyshared-3; seq 1 (k1) was still in flight:
    # taken back, it reaches keyshared-3 REDISPATCH_LAG = 5 positions after the join, once
    # keyshared-3 already had seq 6 and 7 of k1
    ks = KeyShared(2, join=0.4, bug="reorder")
    delivered = key_shared_deliveries(_got(spark, 10, join=4), ks, 3)
    assert _in_order(delivered, "keyshared-2") == []
    assert _in_order(delivered, "keyshared-3") == [(5, 0), (6, 0), (7, 0), (8, 0), (1, 1)]
    late = TK.key_out_of_order(delivered, 3, "s").collect()
    assert [(r.seq, r.kind) for r in late] == [(1, "key_out_of_order")]
    # late by microseconds, read a minute after the acks: its key was not stuck
    assert TK.stuck_keys(_acked(spark, 10), delivered, 3, 1, 60_000_000, 10_000, "s").count() == 0


def test_a_stuck_key_waits_while_the_subscription_receives_other_keys(spark):
    """k1 (seq 1, 6, 7) makes no progress for 25 s after seq 1 while k0 and k2 flow: seq 6,
    whose receipt ends the stall, is the one stuck_key; a backlog read without a pause, and a
    wait of 9 s, are none. The reads start a minute after the acks."""
    schema = (
        "stream long, seq long, ledger_id long, entry_id long, consumer string, slot long, "
        "redelivery_count int"
    )

    def stuck(slots: dict[int, int]) -> list[int]:
        rows = [(0, s, 10, s, "c", slot, 0) for s, slot in slots.items()]
        delivered = spark.createDataFrame(rows, schema)
        found = TK.stuck_keys(_acked(spark, 8), delivered, 3, 1, 60_000_000, 10_000, "s")
        return [r.seq for r in found.orderBy("seq").collect()]

    backlog = {s: 2 * s for s in range(8)}
    assert stuck(backlog) == []
    assert stuck({**backlog, 6: 5_000_000, 7: 5_000_002}) == [6]  # 25 s at 5 µs a slot
    assert stuck({**backlog, 6: 1_800_000, 7: 1_800_002}) == []  # 9 s


def test_correct_churn_never_has_two_consumers_serving_a_key_at_once(spark):
    """auto-split with keyshared-1 leaving never hands a key back to a former owner: each key's
    consumers hold it one after another (no key_overlap), and no key goes out of order."""
    ks = KeyShared(3, join=0.3, leave=0.6)
    delivered = key_shared_deliveries(_got(spark, 300, crash=180, join=90), ks, 16)
    keyed = delivered.select("*", key_column(F.col("seq"), 16).alias("key"))
    spans = (
        keyed.groupBy("key", "consumer")
        .agg(F.min("slot").alias("first"), F.max("slot").alias("last"))
        .orderBy("key", "first")
        .collect()
    )
    by_key: dict[str, list[tuple[int, int]]] = {}
    for r in spans:
        by_key.setdefault(r.key, []).append((r.first, r.last))
    assert len(by_key) == 16 and any(len(s) > 1 for s in by_key.values())  # keys moved
    for held in by_key.values():
        assert all(a[1] < b[0] for a, b in zip(held, held[1:], strict=False))
    assert TK.key_out_of_order(delivered, 16, "s").count() == 0
    assert TK.stuck_keys(_acked(spark, 300), delivered, 16, 1, 60_000_000, 10_000, "s").count() == 0


def test_sticky_churn_is_a_replacement_of_the_leavers_range(spark):
    # keyshared-1 holds [0, 52000) (k0 and k2), keyshared-2 the rest (k1); keyshared-3
    # replaces keyshared-1 at position 6
    ks = KeyShared(2, mode="sticky", ranges=(0, 52_000, 65_536), join=0.6, leave=0.6)
    delivered = key_shared_deliveries(_got(spark, 10, crash=6, join=6), ks, 3)
    assert _in_order(delivered, "keyshared-2") == [(s, 0) for s in (1, 6, 7)]
    assert _in_order(delivered, "keyshared-3") == [
        *[(s, 1) for s in (0, 2, 3, 4, 5)],
        *[(s, 0) for s in (8, 9)],
    ]


def test_failover_overlap_the_old_consumer_keeps_receiving_after_the_standby_started(spark):
    got = spark.range(40).select(
        F.lit(0).cast("long").alias("stream"),
        F.col("id").alias("seq"),
        F.lit(10).cast("long").alias("ledger_id"),
        F.col("id").alias("entry_id"),
        F.col("id").alias("pos"),
        F.lit(24).cast("long").alias("crash_pos"),
    )
    active, standby = "failover-a", "failover-b"
    member = Consumer(standby, "sub-failover", (), mode="failover", leaves=active)
    clean = D.failover_deliveries(got, standby, active)
    assert TK.failover_overlaps(clean, member, "s").count() == 0
    buggy = D.failover_deliveries(got, standby, active, overlap=8)
    assert _in_order(buggy, active) == [(p, 0) for p in range(32)]
    # the standby starts REDISPATCH_LAG = 5 positions after the leave: they alternate for 3
    # deliveries each — the standby's first three (redelivered) ones between two of the old
    # consumer's, the old consumer's last three (seq 29–31) between two of the standby's
    overlaps = TK.failover_overlaps(buggy, member, "s").orderBy("seq").collect()
    assert [(r.seq, r.kind) for r in overlaps] == [
        (s, "failover_overlap") for s in (14, 15, 16, 29, 30, 31)
    ]


def test_key_shared_options_parse_and_refuse_what_the_model_cannot_run():
    nested = {
        "scenario": "control",
        "keys": 8,
        "key_shared": {"consumers": 3, "mode": "auto_split", "churn": ["join:0.3", "leave:0.6"]},
    }
    s = validate(scenario_from(nested))
    assert s.key_shared == KeyShared(3, "auto_split", (), 0.3, 0.6, "")
    flat = {"scenario": "control", "keys": 8, "key_shared_consumers": 3, "key_shared_join": 0.3}
    assert scenario_from(flat).key_shared == KeyShared(3, join=0.3)
    two = {"keys": 4, "key_shared_consumers": 2}
    refused = {
        "needs message keys": {"key_shared_consumers": 2},
        "needs a joining consumer": {**two, "key_shared_bug": "reorder"},
        "replacement": {
            "keys": 4,
            "key_shared": {"consumers": 2, "mode": "sticky", "churn": [{"join": 0.3}]},
        },
        "boundaries": {**two, "key_shared_mode": "sticky", "key_shared_ranges": "0,100"},
        "needs a Failover": {"failover_bug": "overlap"},
    }
    for message, options in refused.items():
        with pytest.raises(UsageError, match=message):
            validate(scenario_from({"scenario": "control", **options}))


def test_each_subscription_names_its_type_and_the_key_shared_one_reads_last():
    s = scenario_from(
        {"scenario": "control", "run_id": "k", "shared_crash": 0.4, "failover_crash": 0.5,
         "keys": 8, "key_shared": {"consumers": 3, "churn": ["join:0.3", "leave:0.6"]}}
    )  # fmt: skip
    found = consumers(build_plan(s))
    assert [(c.subscription, c.subscription_type) for c in found] == [
        ("reader-1", "Exclusive"),
        ("sub-1", "Exclusive"),
        ("sub-shared", "Shared"),
        ("sub-failover", "Failover"),
        ("sub-keyshared", "Key_Shared"),
    ]
    assert found[-1].members == tuple(f"keyshared-{n}" for n in range(1, 5))


def test_the_verdict_is_false_on_a_violation_kind_only():
    row = dict.fromkeys(RUN_COUNTS, 0)
    assert T.valid({**row, "shared_reordered": 10}, dedup=False, all_ended=True) == "true"
    assert T.valid({**row, "key_out_of_order": 1}, dedup=False, all_ended=True) == "false"
    assert T.valid({**row, "failover_overlap": 1}, dedup=False, all_ended=False) == "false"
    assert T.valid(row, dedup=False, all_ended=False) == "unknown"
