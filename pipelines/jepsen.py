"""Two anomalies named by Jepsen's Kafka/Redpanda queue checker:

- poll skip: a consumer's MessageIds jump over stored messages (MessageIds some producer ack or
  some consumer delivery shows to exist) that it had not received yet — whether it gets them
  later or never. A reader on a broker with autoSkipNonRecoverableData skipping an unreadable
  fragment is one.
- non-monotonic send: a producer's acked MessageIds (per partition, in the producer's own
  order) going backwards. Pulsar allocates ledger ids increasingly and entry ids within a
  ledger, so the acks one producer sees on one partition must rise.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import (
    MESSAGE_KEY,
    event_order,
    from_producer,
    is_ack,
    plural,
    seq_blocks,
    seq_range,
    to_anomalies,
    was_or_were,
)

TOPIC_PARTITION = ["run_id", "topic", "partition"]
ID = ["ledger_id", "entry_id", "batch_index"]


def ranked_ids(message_history: DataFrame) -> DataFrame:
    """Every stored MessageId of a partition with its rank in storage order (1, 2, ...)."""
    stored = message_history.select(*MESSAGE_KEY, F.explode("copies").alias("id")).filter(
        F.col("id.ledger_id") >= 0
    )
    in_storage_order = (
        W.partitionBy(*TOPIC_PARTITION)
        .orderBy("id.ledger_id", "id.entry_id", "id.batch_index")
        .rowsBetween(W.unboundedPreceding, W.currentRow)
    )
    return stored.select(
        *MESSAGE_KEY,
        *[F.col(f"id.{c}").alias(c) for c in ID],
        F.dense_rank().over(in_storage_order).alias("rank"),
    )


def detect_poll_skip(message_history: DataFrame, delivery: DataFrame) -> DataFrame:
    """Stored messages a consumer jumped over: after its furthest delivery so far it got one
    further than the next stored MessageId. count = skipped messages, blocks by seq."""
    ranks = ranked_ids(message_history)
    consumer_order = (
        W.partitionBy(*TOPIC_PARTITION, "consumer")
        .orderBy("delivery_index")
        .rowsBetween(W.unboundedPreceding, -1)
    )
    jumps = (
        delivery.join(ranks.select(*TOPIC_PARTITION, *ID, "rank"), [*TOPIC_PARTITION, *ID], "inner")
        .withColumn("furthest", F.max("rank").over(consumer_order))
        .filter(F.col("rank") > F.col("furthest") + 1)
        .select(
            *TOPIC_PARTITION,
            "subscription",
            "consumer",
            (F.col("furthest") + 1).alias("skip_from"),
            (F.col("rank") - 1).alias("skip_to"),
        )
    )
    in_jump = (
        (F.col("r.run_id") == F.col("j.run_id"))
        & (F.col("r.topic") == F.col("j.topic"))
        & (F.col("r.partition") == F.col("j.partition"))
        & F.col("r.rank").between(F.col("j.skip_from"), F.col("j.skip_to"))
    )
    skipped = (
        ranks.alias("r")
        .join(F.broadcast(jumps.alias("j")), in_jump, "inner")
        .select(*[F.col(f"r.{c}") for c in MESSAGE_KEY], "j.subscription", "j.consumer")
        .withColumn("kind", F.lit("poll_skip"))
    )
    blocks = seq_blocks(
        skipped.dropDuplicates([*MESSAGE_KEY, "subscription", "consumer"]),
        F.countDistinct("seq").alias("count"),
        F.array_sort(F.collect_set("consumer")).alias("consumers"),
        F.lit(None).cast("timestamp").alias("first_ts"),
        F.lit(None).cast("timestamp").alias("last_ts"),
    )
    explanation = F.format_string(
        "%s (%s) %s %s skipped by consumer(s) %s of subscription %s: its MessageIds jumped "
        "over them although they are stored — a poll skip (Jepsen), as when a broker skips "
        "unreadable data",
        plural("count", "stored message", "stored messages"),
        seq_range(),
        from_producer(),
        was_or_were("count"),
        F.array_join("consumers", ", "),
        F.col("subscription"),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))


def detect_nonmonotonic_send(producer_events: DataFrame) -> DataFrame:
    """Acks whose MessageId is lower than an earlier ack of the same producer and partition."""
    order = event_order()
    stream = ["run_id", "topic", "partition", "client"]
    so_far = W.partitionBy(*stream).orderBy("order").rowsBetween(W.unboundedPreceding, -1)
    acks = (
        producer_events.filter(is_ack() & (F.col("ledger_id") >= 0))
        .select(*stream, "seq", "ts", order.alias("order"), F.struct(*ID).alias("id"))
        .withColumn("highest", F.max("id").over(so_far))
    )
    backwards = acks.filter(F.col("id") < F.col("highest")).select(
        "run_id",
        "topic",
        F.lit(None).cast("string").alias("subscription"),
        "partition",
        F.col("client").alias("producer"),
        "seq",
        "ts",
        F.lit("nonmonotonic_send").alias("kind"),
        "highest",
    )
    blocks = seq_blocks(
        backwards,
        F.count("*").alias("count"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.max("highest").alias("highest"),
    )
    explanation = F.format_string(
        "%s (%s) %s %s acked with a MessageId lower than an earlier ack of the same producer "
        "(up to %d:%d) — a non-monotonic send (Jepsen): acks on one partition must rise",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        was_or_were("count"),
        F.col("highest.ledger_id"),
        F.col("highest.entry_id"),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))
