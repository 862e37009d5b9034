"""Inconsistent MessageIds (Jepsen): two different messages (producer, seq) acked or
delivered under the same MessageId (partition, ledger, entry, batch index).

One window over each entry's copies and one aggregation on the same clustering: the
copies are shuffled once."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import (
    MESSAGE_KEY,
    from_producer,
    plural,
    seq_blocks,
    seq_range,
    to_anomalies,
    was_or_were,
)

STORED_ID = ["run_id", "topic", "partition", "ledger_id", "entry_id", "batch_index"]


def detect_inconsistent_ids(message_history: DataFrame) -> DataFrame:
    """gold.anomalies rows of inconsistent_message_id: every message that shares one of its
    MessageIds (`copies`: acked or delivered) with another message. Producer-side: no
    subscription (counted for every subscription of the topic)."""
    copies = message_history.select(*MESSAGE_KEY, F.explode("copies").alias("id")).select(
        *MESSAGE_KEY, *[F.col(f"id.{c}").alias(c) for c in STORED_ID[3:]]
    )
    # A client may record a batched message's id without its batch index (-1) on one side:
    # in an entry that is a batch, -1 names no single message and is not compared.
    same_entry = W.partitionBy(*STORED_ID[:5]).rowsBetween(
        W.unboundedPreceding, W.unboundedFollowing
    )
    batched = (F.max("batch_index").over(same_entry) >= 0).alias("batched")
    comparable = copies.select("*", batched).filter((F.col("batch_index") >= 0) | ~F.col("batched"))
    message = F.struct(F.col("producer").alias("producer"), F.col("seq").alias("seq"))
    shared = (
        comparable.groupBy(*STORED_ID)
        .agg(F.array_sort(F.collect_set(message)).alias("messages"))
        .filter(F.size("messages") > 1)
    )
    involved = shared.select(*STORED_ID, "messages", F.explode("messages").alias("message")).select(
        "run_id",
        "topic",
        F.lit(None).cast("string").alias("subscription"),
        "partition",
        F.col("message.producer").alias("producer"),
        F.col("message.seq").alias("seq"),
        F.lit("inconsistent_message_id").alias("kind"),
        F.struct(*STORED_ID[3:]).alias("id"),
        F.filter("messages", lambda m: m != F.col("message")).alias("others"),
    )
    blocks = seq_blocks(
        involved,
        F.count_distinct("seq").alias("count"),
        F.min_by("id", "seq").alias("id"),
        F.min_by(F.element_at("others", 1), "seq").alias("other"),
        F.lit(None).cast("timestamp").alias("first_ts"),
        F.lit(None).cast("timestamp").alias("last_ts"),
    )
    explanation = F.format_string(
        "%s (%s) %s %s stored or delivered under a MessageId that another message also has "
        "(e.g. %d:%d:%d, also seq %d from producer %s) — inconsistent MessageIds (Jepsen): "
        "one MessageId must name one message",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        was_or_were("count"),
        F.col("id.ledger_id"),
        F.col("id.entry_id"),
        F.col("id.batch_index"),
        F.col("other.seq"),
        F.col("other.producer"),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))
