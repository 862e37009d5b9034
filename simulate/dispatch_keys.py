"""Message keys and the Key_Shared subscription `sub-keyshared`, in Spark.

- A message's key (`keys` = N > 0): `k<h mod N>`, h = Spark's xxhash64 of its seq — the same
  seq has the same key on every partition and in every run.
- Its dispatch hash: Spark's Murmur3 hash of the key mod 65536 (Pulsar's sticky key hash is a
  Murmur3 of the key mod 65536 too, with another seed).

Key_Shared dispatch over `got` (stored copies with stream, seq, ledger_id, entry_id, pos, and
stop_pos, crash_pos — where keyshared-1 leaves — and join_pos — where keyshared-<n+1> joins):

- every entry goes to the consumer whose hash range holds its key at that point of the topic
  (key_shared.KeyShared.assignment); slot 2·pos, so a joiner only gets entries after its join;
- a leave: the leaver's last UNACKED_WINDOW deliveries (received, not acked) are redelivered
  (redelivery_count + 1), in order, to the consumers now owning their keys, before any newer
  entry: entries from crash_pos on come UNACKED_WINDOW positions later (slot 2·(pos + W));
- `bug: reorder` (apache/pulsar 6554, 8292, 12885 and PIP-282: a key moved to a joining
  consumer while older entries of it were still in flight): the entries of the last
  UNACKED_WINDOW positions before the join whose key moves at the join had been dispatched
  to their old owner but were still in its receiver queue, unseen by its application. The
  broker takes them back and gives them to the new owner only REDISPATCH_LAG positions after
  the join (odd slots, redelivery_count 1) — after the new owner already received newer
  entries of those keys. Their first receipt is that late delivery: a key_out_of_order each
  time a newer entry of the key came first.

A correct dispatcher (no bug) never lets two consumers serve a key at once and never delivers
a message first after a newer one of its key: 0 key_overlap, key_out_of_order and stuck_key
(truth_keys.py).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from simulate.dispatch import REDISPATCH_LAG, UNACKED_WINDOW
from simulate.key_shared import HASH_SPACE, SUBSCRIPTION, KeyShared

__all__ = ["SUBSCRIPTION", "key_column", "key_shared_deliveries", "owner_column"]


def key_column(seq: Column, keys: int) -> Column:
    """The message's key, null without keys (then the trace has no `key` field)."""
    if keys <= 0:
        return F.lit(None).cast("string")
    return F.concat(F.lit("k"), F.pmod(F.xxhash64(seq), F.lit(keys)).cast("string"))


def key_hash(key: Column) -> Column:
    return F.pmod(F.hash(key), F.lit(HASH_SPACE)).cast("long")


def owner_column(ks: KeyShared, hashed: Column, joined: Column, left: Column) -> Column:
    """The consumer owning hash `hashed` once the joiner joined / the leaver left or not."""

    def owner(is_joined: bool, is_left: bool) -> Column:
        ranges = ks.assignment(is_joined, is_left)
        chosen = F.lit(ranges[-1][2])
        for _, high, name in reversed(ranges[:-1]):
            chosen = F.when(hashed < high, F.lit(name)).otherwise(chosen)
        return chosen

    return (
        F.when(joined & left, owner(True, True))
        .when(joined, owner(True, False))
        .when(left, owner(False, True))
        .otherwise(owner(False, False))
    )


def _row(consumer: Column, slot: Column, count: Column) -> list[Column | str]:
    return [
        "stream",
        "seq",
        "ledger_id",
        "entry_id",
        "hash",
        "crash_pos",
        "join_pos",
        consumer.alias("consumer"),
        slot.cast("long").alias("slot"),
        count.cast("int").alias("redelivery_count"),
    ]


def key_shared_deliveries(got: DataFrame, ks: KeyShared, keys: int) -> DataFrame:
    """stream, seq, ledger_id, entry_id, consumer, slot, redelivery_count (dispatch.py's
    delivery rows) of `sub-keyshared`."""
    pos, join, crash = F.col("pos"), F.col("join_pos"), F.col("crash_pos")

    def joined_at(p: Column) -> Column:
        return p >= join if ks.join else F.lit(False)

    def left_at(p: Column) -> Column:
        return p >= crash if ks.leave else F.lit(False)

    def slot_of(p: Column) -> Column:  # entries after a leave wait for the leaver's tail
        return (p + F.when(left_at(p), UNACKED_WINDOW).otherwise(0)) * 2

    hashed = got.select("*", key_hash(key_column(F.col("seq"), keys)).alias("hash"))
    h = F.col("hash")
    owner = owner_column(ks, h, joined_at(pos), left_at(pos))
    held = F.lit(False)
    if ks.bug == "reorder":
        moves = owner != owner_column(ks, h, F.lit(True), left_at(pos))
        held = (pos >= join - UNACKED_WINDOW) & (pos < join) & moves
    first = hashed.filter(~held).select(*_row(owner, slot_of(pos), F.lit(0)))
    delivered = first
    if ks.bug == "reorder":
        nth = F.row_number().over(
            W.partitionBy("stream").orderBy("pos").rowsBetween(W.unboundedPreceding, 0)
        )
        late = hashed.filter(held).select("*", (join + REDISPATCH_LAG + nth - 1).alias("at"))
        at = F.col("at")
        new_owner = owner_column(ks, h, F.lit(True), left_at(at))
        delivered = delivered.unionByName(late.select(*_row(new_owner, slot_of(at) + 1, F.lit(1))))
    if ks.leave:
        delivered = delivered.unionByName(_leavers_tail(delivered, ks, joined_at(crash)))
    return delivered.drop("hash", "crash_pos", "join_pos")


def _leavers_tail(delivered: DataFrame, ks: KeyShared, joined: Column) -> DataFrame:
    """The leaver's last UNACKED_WINDOW deliveries again, in order, to their keys' new owners,
    in the UNACKED_WINDOW positions the leave made room for (slots 2·crash_pos … )."""
    last_first = (
        W.partitionBy("stream").orderBy(F.desc("slot")).rowsBetween(W.unboundedPreceding, 0)
    )
    leavers = delivered.filter(F.col("consumer") == ks.leaver).select(
        "*", F.row_number().over(last_first).alias("from_end")
    )
    tail = leavers.filter(F.col("from_end") <= UNACKED_WINDOW)
    new_owner = owner_column(ks, F.col("hash"), joined, F.lit(True))
    slot = (F.col("crash_pos") + UNACKED_WINDOW - F.col("from_end")) * 2
    return tail.select(*_row(new_owner, slot, F.col("redelivery_count") + 1))
