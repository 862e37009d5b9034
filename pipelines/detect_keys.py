"""The promises of Key_Shared and Failover subscriptions (docs/subscription-types.md):

- key_out_of_order: on Key_Shared, a message first received by the subscription after the
  first receipt of a higher seq of the same producer, partition and dispatch key.
- stuck_key: on Key_Shared, an acked message whose key made no progress for more than
  `stuck_key_ms` before it was first received (counted from the latest of its ack, the key's
  previous receipt and the subscription's first receipt on the partition), while the
  subscription received other messages in that time (one per stall: the message whose
  receipt ended it).
- failover_overlap / key_overlap: two consumers served one partition (Failover) or one key
  (Key_Shared) at once: consumer B got deliveries between two consecutive deliveries to
  consumer A at most `ownership_gap_ms` apart.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import (
    delivered_to,
    from_producer,
    plural,
    seq_blocks,
    seq_range,
    to_anomalies,
    to_millis,
)
from pulsar_audit.config import PipelineConfig

SUBSCRIPTION_PARTITION = ["run_id", "topic", "subscription", "partition"]


def _key_shared(subscriptions: DataFrame) -> DataFrame:
    """The Key_Shared subscriptions whose receives carry keys (others cannot be judged)."""
    return F.broadcast(
        subscriptions.filter((F.col("subscription_type") == "Key_Shared") & F.col("keyed")).select(
            "run_id", "topic", "subscription"
        )
    )


def detect_key_order(
    message_history: DataFrame, subscriptions: DataFrame, pipeline: PipelineConfig
) -> DataFrame:
    """gold.anomalies rows of key_out_of_order and stuck_key, from each message's first
    receipt by each Key_Shared subscription (silver.message_history: no walk of deliveries)."""
    received = delivered_to(message_history).join(
        _key_shared(subscriptions), ["run_id", "topic", "subscription"], how="left_semi"
    )
    key = F.coalesce("key", F.lit(""))  # Pulsar dispatches messages without a key together
    before = (W.unboundedPreceding, -1)
    key_order = W.partitionBy(*SUBSCRIPTION_PARTITION, "producer", key).orderBy("first_ts", "seq")
    key_progress = W.partitionBy(*SUBSCRIPTION_PARTITION, key).orderBy("first_ts", "seq")
    receipts = W.partitionBy(*SUBSCRIPTION_PARTITION).orderBy("first_ts", "producer", "seq")
    walked = received.select(
        "*",
        F.max("seq").over(key_order.rowsBetween(*before)).alias("higher_seq"),
        # the stall of a message's key began at the latest of: its ack, the key's previous
        # receipt, the subscription's first receipt on the partition (reading had started)
        F.greatest(
            "ack_ts",
            F.max("first_ts").over(key_progress.rowsBetween(*before)),
            F.min("first_ts").over(receipts.rowsBetween(W.unboundedPreceding, W.currentRow)),
        ).alias("stalled_from"),
        F.max("first_ts").over(receipts.rowsBetween(*before)).alias("other_receipt"),
    ).withColumn("waited_ms", to_millis(F.col("stalled_from"), F.col("first_ts")))
    # the subscription received something else while this key waited: the key was stuck, not
    # the whole subscription (an outage) nor a reader catching up on a backlog
    stuck = (
        F.col("acked")
        & (F.col("waited_ms") > pipeline.stuck_key_ms)
        & (F.col("other_receipt") > F.col("stalled_from"))
    )
    kinds = F.array_compact(
        F.array(
            F.when(F.col("seq") < F.col("higher_seq"), F.lit("key_out_of_order")),
            F.when(stuck, F.lit("stuck_key")),
        )
    )
    found = walked.select("*", F.explode(kinds).alias("kind"))
    blocks = seq_blocks(
        found,
        F.count("*").alias("count"),
        F.min("first_ts").alias("first_ts"),
        F.max("first_ts").alias("last_ts"),
        F.array_sort(F.collect_set(key)).alias("keys"),
        F.max("higher_seq").alias("higher_seq"),
        F.max("waited_ms").alias("waited_ms"),
    )
    what = F.format_string(
        "%s (%s) %s with key(s) %s",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        _listed("keys"),
    )
    out_of_order = F.format_string(
        "%s reached Key_Shared subscription %s after a higher seq of the same key (up to %d) "
        "had already been received — per-key order broken",
        what,
        F.col("subscription"),
        F.col("higher_seq"),
    )
    stuck_text = F.format_string(
        "%s waited up to %.0f ms, their key making no progress, before Key_Shared subscription "
        "%s received them, while it kept receiving other messages — a stuck key",
        what,
        F.col("waited_ms"),
        F.col("subscription"),
    )
    explanation = F.when(F.col("kind") == "key_out_of_order", out_of_order).otherwise(stuck_text)
    return to_anomalies(blocks.withColumn("explanation", explanation))


def _listed(column: str, most: int = 5) -> Column:
    """'a, b, c' or 'a, b, c, d, e and 7 more'."""
    items = F.col(column)
    shown = F.array_join(F.slice(items, 1, most), ", ")
    return F.when(F.size(items) <= most, shown).otherwise(
        F.format_string("%s and %d more", shown, F.size(items) - most)
    )


def detect_ownership_overlap(
    delivery: DataFrame, subscriptions: DataFrame, pipeline: PipelineConfig
) -> DataFrame:
    """gold.anomalies rows of failover_overlap (per partition of a Failover subscription)
    and key_overlap (per key of a Key_Shared one): one row per (interleaved run of
    deliveries to one consumer, producer)."""
    keyed = _key_shared(subscriptions).withColumn("per_key", F.lit(True))
    failover = F.broadcast(
        subscriptions.filter(F.col("subscription_type") == "Failover").select(
            "run_id", "topic", "subscription", F.lit(False).alias("per_key")
        )
    )
    typed = delivery.join(
        keyed.unionByName(failover), ["run_id", "topic", "subscription"], how="inner"
    )
    # the unit one consumer owns: a key, or (Failover) the whole partition; never null, the
    # runs are joined back on it
    unit = F.when(F.col("per_key"), F.coalesce("key", F.lit(""))).otherwise("").alias("unit")
    group = [*SUBSCRIPTION_PARTITION, "per_key", "unit"]
    in_time = W.partitionBy(*group).orderBy("ts", "consumer", "delivery_index")
    marked = typed.select("*", unit).withColumn(
        "new_run",
        F.coalesce(F.lag("consumer").over(in_time) != F.col("consumer"), F.lit(True)).cast("int"),
    )
    numbered = marked.withColumn(
        "run", F.sum("new_run").over(in_time.rowsBetween(W.unboundedPreceding, W.currentRow))
    )
    per_producer = numbered.groupBy(*group, "run", "consumer", "producer").agg(
        F.count("*").alias("count"),
        F.min("seq").alias("seq_from"),
        F.max("seq").alias("seq_to"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
    )
    runs = per_producer.groupBy(*group, "run", "consumer").agg(
        F.min("first_ts").alias("run_first_ts"), F.max("last_ts").alias("run_last_ts")
    )
    around = W.partitionBy(*group).orderBy("run")
    interleaved = runs.select(
        *group,
        "run",
        F.lag("consumer").over(around).alias("holder"),
        F.lag("run_last_ts").over(around).alias("holder_before"),
        F.lead("consumer").over(around).alias("holder_again"),
        F.lead("run_first_ts").over(around).alias("holder_after"),
    ).filter(
        (F.col("holder") == F.col("holder_again"))
        & (to_millis(F.col("holder_before"), F.col("holder_after")) <= pipeline.ownership_gap_ms)
    )
    found = per_producer.join(interleaved, [*group, "run"], how="inner").withColumn(
        "kind", F.when(F.col("per_key"), "key_overlap").otherwise("failover_overlap")
    )
    gap = to_millis(F.col("holder_before"), F.col("holder_after"))
    unit_text = F.when(F.col("per_key"), F.format_string("key %s", F.col("unit"))).otherwise(
        F.lit("the partition")
    )
    explanation = F.format_string(
        "%s (%s) %s went to consumer %s of %s subscription %s while consumer %s held %s: it "
        "got them between two of %s's deliveries %.1f ms apart (at most %d ms: no reconnect "
        "fits in between) — two consumers served %s at once",
        plural("count", "delivery", "deliveries"),
        seq_range(),
        from_producer(),
        F.col("consumer"),
        F.when(F.col("per_key"), "Key_Shared").otherwise("Failover"),
        F.col("subscription"),
        F.col("holder"),
        unit_text,
        F.col("holder"),
        gap,
        F.lit(pipeline.ownership_gap_ms),
        unit_text,
    )
    return to_anomalies(found.withColumn("explanation", explanation))
