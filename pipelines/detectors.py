"""One detector per anomaly kind: each returns one ANOMALIES row per contiguous seq block.

Detectors leave `causes` empty; root-cause correlation fills them in later.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import (
    MESSAGE_KEY,
    delivered_to,
    from_producer,
    plural,
    seq_blocks,
    seq_range,
    to_anomalies,
    was_or_were,
)
from pipelines.detect_duplicated import detect_duplicated
from pipelines.detect_order import detect_nonmonotonic_send, detect_poll_skip

SUBSCRIBED_MESSAGE = [*MESSAGE_KEY, "subscription"]


def detect_lost_or_unseen(message_history: DataFrame, subscriptions: DataFrame) -> DataFrame:
    """Acked messages a subscription never got: `lost` if all its consumers ended, else `unseen`."""
    topic_subscriptions = F.broadcast(
        subscriptions.select("run_id", "topic", "subscription", "all_ended")
    )
    got_it = F.exists("subscriptions", lambda s: s["subscription"] == F.col("subscription"))
    missing = (
        message_history.filter(F.col("acked"))
        .select(*MESSAGE_KEY, "send_ts", "ack_ts", "subscriptions")
        .join(topic_subscriptions, ["run_id", "topic"], how="inner")
        .filter(~got_it)
        .drop("subscriptions")
        .withColumn("kind", F.when(F.col("all_ended"), "lost").otherwise("unseen"))
    )
    blocks = seq_blocks(
        missing,
        F.count("*").alias("count"),
        F.min(F.coalesce("send_ts", "ack_ts")).alias("first_ts"),
        F.max("ack_ts").alias("last_ts"),
    ).join(
        F.broadcast(subscriptions.select("run_id", "topic", "subscription", "missing_end")),
        ["run_id", "topic", "subscription"],
        how="left",
    )
    acked = plural("count", "acked message", "acked messages")
    what = F.format_string("%s (%s) %s", acked, seq_range(), from_producer())
    lost = F.format_string(
        "%s %s never delivered to subscription %s, although every consumer read to the end "
        "of the topic",
        what,
        was_or_were("count"),
        F.col("subscription"),
    )
    unseen = F.format_string(
        "%s %s not delivered to subscription %s, but consumer(s) %s did not read to the end of "
        "the topic (no end event), so they may be unread rather than lost",
        what,
        was_or_were("count"),
        F.col("subscription"),
        F.array_join("missing_end", ", "),
    )
    untraced = F.format_string("%s: no consumer of this topic was traced", what)
    explanation = (
        F.when(F.col("kind") == "lost", lost)
        .when(F.col("subscription") == "", untraced)
        .otherwise(unseen)
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))


def detect_redelivered(delivery: DataFrame) -> DataFrame:
    """(message, MessageId) pairs delivered more than once to a subscription; count = pairs."""
    pairs = (
        delivery.groupBy(*SUBSCRIBED_MESSAGE, "ledger_id", "entry_id", "batch_index")
        .agg(
            F.count("*").alias("deliveries"),
            F.min("ts").alias("first_ts"),
            F.max("ts").alias("last_ts"),
            F.max("redelivery_count").alias("redelivery_count"),
        )
        .filter(F.col("deliveries") > 1)
        .withColumn("kind", F.lit("redelivered"))
    )
    blocks = seq_blocks(
        pairs,
        F.count("*").alias("count"),
        F.sum("deliveries").alias("deliveries"),
        F.min("first_ts").alias("first_ts"),
        F.max("last_ts").alias("last_ts"),
        F.max("redelivery_count").alias("redelivery_count"),
    )
    explanation = F.format_string(
        "%s (%s) %s %s delivered to subscription %s more than once under the same MessageId "
        "(%d deliveries in all, redelivery_count up to %d) — at-least-once redelivery, "
        "not a duplicate write",
        plural("count", "stored message", "stored messages"),
        seq_range(),
        from_producer(),
        was_or_were("count"),
        F.col("subscription"),
        F.col("deliveries"),
        F.col("redelivery_count"),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))


def detect_out_of_order(delivery: DataFrame) -> DataFrame:
    """Deliveries with a lower seq than the consumer's previous one from that producer,
    that the consumer had not received before (a repeat is a redelivery, not a reordering)."""
    stream = ["run_id", "topic", "partition", "consumer", "producer"]
    in_order = W.partitionBy(*stream).orderBy("delivery_index").rowsBetween(-1, -1)
    same_seq = W.partitionBy(*stream, "seq").rowsBetween(W.unboundedPreceding, W.unboundedFollowing)
    walked = delivery.select(
        "*",
        F.lag("seq").over(in_order).alias("previous_seq"),
        F.min("delivery_index").over(same_seq).alias("first_index"),
    )
    is_first_receipt = F.col("delivery_index") == F.col("first_index")
    reordered = walked.filter((F.col("seq") < F.col("previous_seq")) & is_first_receipt)
    blocks = seq_blocks(
        reordered.withColumn("kind", F.lit("out_of_order")),
        F.count("*").alias("count"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.array_sort(F.collect_set("consumer")).alias("consumers"),
        F.max("previous_seq").alias("previous_seq"),
    )
    explanation = F.format_string(
        "%s (%s) %s reached subscription %s out of order: consumer(s) %s got each right after "
        "a higher seq (up to %d) and had not received it before — a reordering, not a repeat",
        plural("count", "delivery", "deliveries"),
        seq_range(),
        from_producer(),
        F.col("subscription"),
        F.array_join("consumers", ", "),
        F.col("previous_seq"),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))


def detect_unacked_received(message_history: DataFrame) -> DataFrame:
    """Delivered messages the producer never saw acked (informational, not a violation)."""
    unacked = delivered_to(message_history.filter(~F.col("acked"))).withColumn(
        "kind", F.lit("unacked_received")
    )
    blocks = seq_blocks(
        unacked,
        F.count("*").alias("count"),
        F.sum(F.col("nacked").cast("long")).alias("nacked"),
        F.min("first_ts").alias("first_ts"),
        F.max("last_ts").alias("last_ts"),
    )
    explanation = F.format_string(
        "%s (%s) %s %s delivered to subscription %s but never acked to the producer "
        "(%d nacked) — normal around failures; reported, not a violation",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        was_or_were("count"),
        F.col("subscription"),
        F.col("nacked"),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))


def detect_anomalies(
    message_history: DataFrame,
    delivery: DataFrame,
    subscriptions: DataFrame,
    deduplication: DataFrame,
) -> DataFrame:
    """gold.anomalies: every detector's rows.

    subscriptions: from `pipelines.silver.subscriptions`; deduplication: from
    `pipelines.detect_duplicated.run_deduplication`.
    """
    return (
        detect_lost_or_unseen(message_history, subscriptions)
        .unionByName(detect_duplicated(message_history, deduplication))
        .unionByName(detect_redelivered(delivery))
        .unionByName(detect_out_of_order(delivery))
        .unionByName(detect_unacked_received(message_history))
        .unionByName(detect_poll_skip(message_history, delivery, subscriptions))
        .unionByName(detect_nonmonotonic_send(message_history))
    )
