"""Subscriptions with two consumers, one of which disconnects: what each consumer receives.

Both take `got` (the stored copies a subscription can read: stream, seq, ledger_id, entry_id,
pos, with crash_pos, the storage position at which a consumer disconnects) and return one row
per delivery: stream, seq, ledger_id, entry_id, consumer, slot (the consumer's own order; a
slot is twice a storage position, +1 for a delivery between two positions), redelivery_count.

- Shared (`sub-shared`): the broker dispatches entries round-robin one at a time (even
  positions to shared-a, odd ones to shared-b) until shared-b disconnects at crash_pos. Its
  last UNACKED_WINDOW deliveries were received but not acked (its receiver queue): the broker
  redelivers them to shared-a a little later (REDISPATCH_LAG positions), under the same
  MessageId with redelivery_count 1, one after each new entry — so each follows a higher seq,
  which Shared allows (it does not keep order). Every later entry goes to shared-a.
- Failover (`sub-failover`): the active consumer failover-a gets every entry until it
  disconnects at crash_pos; the standby failover-b becomes active and the broker rewinds to the
  mark-delete position: failover-a's UNACKED_WINDOW unacked entries come again, to failover-b,
  in order (redelivery_count 1), then the rest of the topic. Redelivered, not reordered.
  With `failover_bug: overlap` the broker keeps dispatching to failover-a for `overlap` more
  entries after the standby became active (two consumers active at once: a failover_overlap).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# A consumer acks after processing; it holds this many received-but-unacked messages when it
# disconnects (receiverQueueSize 10: a small prefetch, as consumers sharing work are given).
UNACKED_WINDOW = 10
# The broker sees the disconnect and redispatches this many positions after it.
REDISPATCH_LAG = 5
SHARED_SUBSCRIPTION, SHARED_STAYS, SHARED_LEAVES = "sub-shared", "shared-a", "shared-b"
# failover_bug overlap: how long the old active consumer keeps receiving after the standby
# became active (a few ms: consumers.failover_overlap turns it into entries)
FAILOVER_OVERLAP_US = 2_000
FAILOVER_SUBSCRIPTION, FAILOVER_TAKES_OVER, FAILOVER_LEAVES = (
    "sub-failover",
    "failover-b",
    "failover-a",
)


def _delivery(consumer: Column | str, slot: Column, redelivery_count: int) -> list[Column]:
    name = F.lit(consumer) if isinstance(consumer, str) else consumer
    return [
        "stream",
        "seq",
        "ledger_id",
        "entry_id",
        name.alias("consumer"),
        slot.cast("long").alias("slot"),
        F.lit(redelivery_count).alias("redelivery_count"),
    ]


def shared_deliveries(got: DataFrame, stays: str, leaves: str) -> DataFrame:
    """Round-robin dispatch until `leaves` disconnects; its unacked tail goes to `stays`."""
    pos, crash = F.col("pos"), F.col("crash_pos")
    to_leaver = (pos < crash) & (pos % 2 == 1)
    first = got.select(*_delivery(F.when(to_leaver, leaves).otherwise(stays), pos * 2, 0))
    tail_start = crash - 2 * UNACKED_WINDOW  # the leaver's last UNACKED_WINDOW (odd) positions
    nth = F.floor((pos - tail_start) / 2)
    again = got.filter(to_leaver & (pos >= tail_start)).select(
        *_delivery(stays, (crash + REDISPATCH_LAG + nth) * 2 + 1, 1)
    )
    return first.unionByName(again)


def failover_deliveries(
    got: DataFrame, takes_over: str, leaves: str, overlap: int = 0
) -> DataFrame:
    """`leaves` gets everything before crash_pos; `takes_over` gets its unacked tail again, in
    order, then the rest (both REDISPATCH_LAG positions after the disconnect).

    overlap: `leaves` also gets the next `overlap` entries after crash_pos (between two
    positions: slot 2·pos + 1), while `takes_over` is already active (the injected bug)."""
    pos, crash = F.col("pos"), F.col("crash_pos")
    tail_start = crash - UNACKED_WINDOW
    active = got.filter(pos < crash).select(*_delivery(leaves, pos * 2, 0))
    if overlap:
        late = got.filter((pos >= crash) & (pos < crash + overlap))
        active = active.unionByName(late.select(*_delivery(leaves, pos * 2 + 1, 0)))
    again = got.filter((pos < crash) & (pos >= tail_start)).select(
        *_delivery(takes_over, (crash + REDISPATCH_LAG + pos - tail_start) * 2, 1)
    )
    rest = got.filter(pos >= crash).select(
        *_delivery(takes_over, (pos + REDISPATCH_LAG + UNACKED_WINDOW) * 2, 0)
    )
    return active.unionByName(again).unionByName(rest)
