"""What one walk of each consumer's deliveries finds (docs/subscription-types.md):

- out_of_order: a consumer's first receipt of a message right after a higher seq of the same
  producer and partition. On a Shared subscription the same walk is `shared_reordered`
  (information: Shared promises no order); Key_Shared is judged per key instead
  (`pipelines.detect_keys`).
- nonmonotonic_poll (Jepsen): a consumer's receive on a partition whose MessageId is lower
  than that of its previous receive there, for a message new to the consumer with
  redelivery_count 0 (Exclusive, Failover or no type given), that is not already out_of_order
  (a lower seq of its own producer): what it adds is going back across producers.

Both windows are partitioned within (run, topic, partition, consumer), so Spark shuffles and
sorts the deliveries once for both.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import ID, READER, Found, blocks_of, from_producer, plural, seq_range

# Types whose consumers walk a partition alone, in storage order (null: the trace names none).
ORDERED_TYPES = ("Exclusive", "Failover")
SPLITTING_TYPES = ("Shared", "Key_Shared")


def with_subscription_type(delivery: DataFrame, subscriptions: DataFrame) -> DataFrame:
    """Deliveries with their subscription's `subscription_type` (null when not given)."""
    key = ["run_id", "topic", "subscription"]
    types = F.broadcast(subscriptions.select(*key, "subscription_type"))
    return delivery.join(types, key, how="left")


def _walked(delivery: DataFrame) -> DataFrame:
    """Each delivery with the previous seq of its producer, the previous MessageId of its
    partition (both in the consumer's own order) and whether it is the consumer's first
    receipt of that message and of that MessageId."""
    by_index = W.partitionBy(*READER).orderBy("delivery_index")
    previous = by_index.rowsBetween(-1, -1)
    previous_of_producer = (
        W.partitionBy(*READER, "producer").orderBy("delivery_index").rowsBetween(-1, -1)
    )
    every = W.unboundedPreceding, W.unboundedFollowing
    same_seq = W.partitionBy(*READER, "producer", "seq").rowsBetween(*every)
    same_id = W.partitionBy(*READER, *ID).rowsBetween(*every)
    message_id = F.when(F.col("ledger_id") >= 0, F.struct(*ID))
    return delivery.select(
        "*",
        F.lag("seq").over(previous_of_producer).alias("previous_seq"),
        F.lag(message_id).over(previous).alias("previous_id"),
        message_id.alias("id"),
        (F.col("delivery_index") == F.min("delivery_index").over(same_seq)).alias("first_seq"),
        (F.col("delivery_index") == F.min("delivery_index").over(same_id)).alias("first_id"),
    )


def _kinds() -> Column:
    """The kinds a walked delivery counts for (an empty array: none)."""
    kind = F.col("subscription_type")
    reordered = (F.col("seq") < F.col("previous_seq")) & F.col("first_seq")
    went_back = (
        (F.col("id") < F.col("previous_id"))
        & F.col("first_id")
        & F.col("first_seq")
        & (F.col("redelivery_count") == 0)
    )
    ordered = kind.isNull() | kind.isin(*ORDERED_TYPES)
    return F.array_compact(
        F.array(
            F.when(reordered & ordered, F.lit("out_of_order")),
            F.when(reordered & (kind == "Shared"), F.lit("shared_reordered")),
            # one finding per delivery: going back in its own producer's seq is out_of_order
            F.when(went_back & ~reordered & ordered, F.lit("nonmonotonic_poll")),
        )
    )


def detect_consumer_walk(typed: DataFrame) -> DataFrame:
    """gold.anomalies rows of out_of_order, shared_reordered and nonmonotonic_poll."""
    return blocks_of([consumer_walk(typed)])


def consumer_walk(typed: DataFrame) -> Found:
    """The deliveries that are out_of_order, shared_reordered or nonmonotonic_poll.

    typed: silver.delivery with each subscription's `subscription_type`
    (`with_subscription_type`)."""
    typed = typed.filter(
        F.col("subscription_type").isNull() | (F.col("subscription_type") != "Key_Shared")
    )
    found = _walked(typed).select(
        "run_id",
        "topic",
        "subscription",
        "partition",
        "producer",
        "seq",
        F.explode(_kinds()).alias("kind"),
        F.col("ts").alias("first_ts"),
        F.col("ts").alias("last_ts"),
        "consumer",
        "previous_seq",
        "previous_id",
    )
    what = F.format_string(
        "%s (%s) %s", plural("count", "delivery", "deliveries"), seq_range(), from_producer()
    )
    consumers = F.array_join("consumers", ", ")
    reordered = F.format_string(
        "%s reached subscription %s out of order: consumer(s) %s got each right after a "
        "higher seq (up to %d) and had not received it before — a reordering, not a repeat",
        what,
        F.col("subscription"),
        consumers,
        F.col("previous_seq"),
    )
    shared = F.format_string(
        "%s reached Shared subscription %s out of order (consumer(s) %s got each right after a "
        "higher seq, up to %d): Shared promises no order — reported, not a violation",
        what,
        F.col("subscription"),
        consumers,
        F.col("previous_seq"),
    )
    went_back = F.format_string(
        "%s to subscription %s went backwards in MessageId: consumer(s) %s got each, new to "
        "them and not a redelivery, right after a higher MessageId (up to %d:%d:%d) on the "
        "same partition — a non-monotonic poll (Jepsen)",
        what,
        F.col("subscription"),
        consumers,
        F.col("previous_id.ledger_id"),
        F.col("previous_id.entry_id"),
        F.col("previous_id.batch_index"),
    )
    return Found(
        found,
        {"out_of_order": reordered, "shared_reordered": shared, "nonmonotonic_poll": went_back},
    )
