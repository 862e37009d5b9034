"""The truth of the subscription types' own kinds (docs/subscription-types.md), in Spark, from
the simulator's delivery model — each row (stream, seq, kind, subscription) is one anomaly.

By construction the model makes none of these, so they have no function here:

- `nonmonotonic_poll`: every consumer reads its entries in storage order, MessageIds rising
  (ledger ids grow with the ledger index); what goes back is a redelivery (redelivery_count
  ≥ 1) or on a Shared / Key_Shared subscription, which the kind does not judge;
- `inconsistent_message_id`: each stored copy has its own (ledger, entry) and every ack names
  one of its message's own copies (or −1:−1, deduplication's "dropped");
- `key_overlap`: a key has one owner at a time — the leaver receives nothing after it left,
  a joiner only entries after it joined, and auto-split re-splits with keyshared-1 leaving
  never hand a key back to a consumer that had it before (tests/simulate/test_dispatch.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from simulate.consumers import READ_STEP_US, Consumer
from simulate.dispatch_keys import key_column
from simulate.plan import Plan
from simulate.truth import out_of_order


def _labelled(df: DataFrame, kind: str, subscription: str) -> DataFrame:
    return df.select(
        "stream", "seq", F.lit(kind).alias("kind"), F.lit(subscription).alias("subscription")
    )


def first_receipts(delivered: DataFrame) -> DataFrame:
    """(stream, seq, slot, redelivery_count) of each message's first delivery to any consumer
    of the subscription (slots are one timeline for all of them)."""
    return delivered.groupBy("stream", "seq").agg(
        F.min("slot").alias("slot"),
        F.min_by("redelivery_count", "slot").alias("redelivery_count"),
    )


def key_out_of_order(delivered: DataFrame, keys: int, subscription: str) -> DataFrame:
    """Messages whose first receipt came after a newer message of their key (same stream).

    In the model only a message taken back from a receiver queue (key_shared_bug reorder) is
    first delivered late — its first delivery is already a redelivery (count ≥ 1): those few
    (≤ UNACKED_WINDOW per stream) are checked against their key's newer first receipts."""
    firsts = first_receipts(delivered).select("*", key_column(F.col("seq"), keys).alias("key"))
    late = firsts.filter(F.col("redelivery_count") > 0).alias("late")
    newer = firsts.alias("newer")
    before = (
        (F.col("newer.stream") == F.col("late.stream"))
        & (F.col("newer.key") == F.col("late.key"))
        & (F.col("newer.seq") > F.col("late.seq"))
        & (F.col("newer.slot") < F.col("late.slot"))
    )
    found = newer.join(F.broadcast(late), before, how="inner").select(
        F.col("late.stream").alias("stream"), F.col("late.seq").alias("seq")
    )
    return _labelled(found.distinct(), "key_out_of_order", subscription)


def stuck_keys(
    messages: DataFrame,
    delivered: DataFrame,
    keys: int,
    streams: int,
    start_us: int,
    stuck_key_ms: int,
    subscription: str,
) -> DataFrame:
    """Acked messages whose key made no progress for more than stuck_key_ms before their first
    receipt — from the latest of their ack, the key's previous first receipt on the stream
    and the subscription's first receipt on the stream — while the subscription received
    other messages meanwhile.

    start_us: when the subscription's reading starts (its receive times are start_us +
    (slot · streams + stream) · READ_STEP_US, as the trace writes them). The whole read of a
    stream lasts (2 · (2 · messages + REDELIVERY_LAG) + 4) · streams · READ_STEP_US at most
    (20 ms for 1,000 messages): no key of the model waits 10 s unless the run is large and its
    keys sparse (a key's consecutive messages that far apart in the backlog)."""
    acked = messages.filter(F.col("outcome") == "ack").select(
        "stream", "seq", F.col("done_us").alias("ack_us")
    )
    received_us = F.lit(start_us) + (F.col("slot") * streams + F.col("stream")) * READ_STEP_US
    firsts = first_receipts(delivered).select(
        "stream",
        "seq",
        key_column(F.col("seq"), keys).alias("key"),
        received_us.alias("received_us"),
    )
    before = (W.unboundedPreceding, -1)
    in_stream = W.partitionBy("stream").orderBy("received_us", "seq")
    in_key = W.partitionBy("stream", "key").orderBy("received_us", "seq")
    whole_stream = W.partitionBy("stream").rowsBetween(W.unboundedPreceding, W.unboundedFollowing)
    walked = firsts.join(acked, ["stream", "seq"], how="left").select(
        "stream",
        "seq",
        "ack_us",
        "received_us",
        F.greatest(
            "ack_us",
            F.max("received_us").over(in_key.rowsBetween(*before)),
            F.min("received_us").over(whole_stream),
        ).alias("stalled_from"),
        F.max("received_us").over(in_stream.rowsBetween(*before)).alias("other_receipt"),
    )
    is_stuck = (
        F.col("ack_us").isNotNull()
        & (F.col("received_us") - F.col("stalled_from") > stuck_key_ms * 1000)
        & (F.col("other_receipt") > F.col("stalled_from"))
    )
    return _labelled(walked.filter(is_stuck), "stuck_key", subscription)


def failover_overlaps(delivered: DataFrame, consumer: Consumer, subscription: str) -> DataFrame:
    """Deliveries to either consumer of the Failover subscription strictly between the first
    and the last delivery of the same stream to the other one (failover_bug overlap): while
    both are active they alternate, and each delivery falls between two of the other's.

    Each consumer's deliveries are consecutive entries, at most 3 slots (15 µs per stream)
    apart: every pair is within pipeline.ownership_gap_ms, so each delivery inside the other
    consumer's span is one failover_overlap (counted per delivery, both ways)."""
    found = None
    for receiver, holder in ((consumer.name, consumer.leaves), (consumer.leaves, consumer.name)):
        span = (
            delivered.filter(F.col("consumer") == holder)
            .groupBy("stream")
            .agg(F.min("slot").alias("first_slot"), F.max("slot").alias("last_slot"))
        )
        inside = (F.col("slot") > F.col("first_slot")) & (F.col("slot") < F.col("last_slot"))
        these = (
            delivered.filter(F.col("consumer") == receiver)
            .join(F.broadcast(span), ["stream"], how="inner")
            .filter(inside)
        )
        found = these if found is None else found.unionByName(these)
    return _labelled(found, "failover_overlap", subscription)


def type_labels(
    messages: DataFrame,
    delivered: DataFrame,
    consumer: Consumer,
    plan: Plan,
    start_us: int,
    stuck_key_ms: int,
) -> DataFrame | None:
    """The kinds a subscription's type judges beyond the common ones (None: nothing more).

    One consumer reading in storage order never goes back; a Shared subscription's
    reorderings are information (shared_reordered); Failover keeps out_of_order; Key_Shared
    judges order per key instead. start_us: when the subscription's reading starts."""
    s, sub = plan.scenario, consumer.subscription
    if consumer.mode == "shared":
        return out_of_order(delivered, sub, kind="shared_reordered")
    if consumer.mode == "failover":
        return out_of_order(delivered, sub).unionByName(failover_overlaps(delivered, consumer, sub))
    if consumer.mode == "key_shared":
        stuck = stuck_keys(messages, delivered, s.keys, s.streams, start_us, stuck_key_ms, sub)
        return key_out_of_order(delivered, s.keys, sub).unionByName(stuck)
    return None
