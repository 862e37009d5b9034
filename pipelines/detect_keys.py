"""The promises of Key_Shared and Failover subscriptions (docs/subscription-types.md):

- key_out_of_order: on Key_Shared, a message first received by the subscription after the
  first receipt of a higher seq of the same producer, partition and dispatch key.
- stuck_key: on Key_Shared, a consumer that got nothing for more than `stuck_key_ms` before
  a delivery (counted from the latest of its previous receipt or subscribe, that message's
  ack and the subscription's first receipt on the partition) while other consumers kept
  receiving.
- failover_overlap / key_overlap: two consumers served one partition (Failover) or one key
  (Key_Shared) at once: consumer B got deliveries between two consecutive deliveries to
  consumer A at most `ownership_gap_ms` apart.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
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


def detect_key_order(message_history: DataFrame, subscriptions: DataFrame) -> DataFrame:
    """gold.anomalies rows of key_out_of_order, from each message's first receipt by each
    Key_Shared subscription (silver.message_history: no walk of deliveries)."""
    received = delivered_to(message_history).join(
        _key_shared(subscriptions), ["run_id", "topic", "subscription"], how="left_semi"
    )
    key = F.coalesce("key", F.lit(""))  # Pulsar dispatches messages without a key together
    key_order = (
        W.partitionBy(*SUBSCRIPTION_PARTITION, "producer", key)
        .orderBy("first_ts", "seq")
        .rowsBetween(W.unboundedPreceding, -1)
    )
    found = (
        received.select("*", F.max("seq").over(key_order).alias("higher_seq"))
        .filter(F.col("seq") < F.col("higher_seq"))
        .withColumn("kind", F.lit("key_out_of_order"))
    )
    blocks = seq_blocks(
        found,
        F.count("*").alias("count"),
        F.min("first_ts").alias("first_ts"),
        F.max("first_ts").alias("last_ts"),
        F.array_sort(F.collect_set(key)).alias("keys"),
        F.max("higher_seq").alias("higher_seq"),
    )
    explanation = F.format_string(
        "%s (%s) %s with key(s) %s reached Key_Shared subscription %s after a higher seq of "
        "the same key (up to %d) had already been received — per-key order broken",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        _listed("keys"),
        F.col("subscription"),
        F.col("higher_seq"),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))


def consumer_joins(consumer_events: DataFrame) -> DataFrame:
    """(run_id, topic, subscription, consumer, ts) of every `subscribe` event: when a consumer
    attached (or came back), from bronze.consumer_events."""
    return consumer_events.filter(F.col("event") == "subscribe").select(
        "run_id",
        "topic",
        F.coalesce("subscription", "client").alias("subscription"),
        F.col("client").alias("consumer"),
        "ts",
    )


def detect_stuck_keys(
    message_history: DataFrame,
    delivery: DataFrame,
    subscriptions: DataFrame,
    joins: DataFrame,
    pipeline: PipelineConfig,
) -> DataFrame:
    """gold.anomalies rows of stuck_key: a Key_Shared consumer that got nothing for more than
    `stuck_key_ms` — counted from the latest of its previous receipt or `subscribe`, the ack
    of the message that ended the gap, and the subscription's first receipt on the partition
    — while other consumers of the subscription kept receiving there; one row per gap (the
    delivery that ended it). A slow consumer is not idle; a whole subscription idle is an
    outage. joins: from `consumer_joins`."""
    key = ["run_id", "topic", "subscription"]
    keyed = delivery.join(_key_shared(subscriptions), key, how="left_semi")
    receipts = W.partitionBy(*SUBSCRIPTION_PARTITION).orderBy("ts", "consumer", "delivery_index")
    placed = keyed.select(
        *MESSAGE_KEY,
        "subscription",
        "consumer",
        "ts",
        "key",
        "delivery_index",
        F.lag("ts").over(receipts).alias("other_receipt"),
        F.min("ts")
        .over(receipts.rowsBetween(W.unboundedPreceding, W.currentRow))
        .alias("reading_since"),
    )
    attached = joins.join(_key_shared(subscriptions), key, how="left_semi")
    # a consumer's own events, receipts on any partition and (re)subscribes, in time order
    own = W.partitionBy(*key, "consumer").orderBy("ts", "delivery_index")
    walked = placed.unionByName(attached, allowMissingColumns=True).select(
        "*", F.lag("ts").over(own).alias("own_previous")
    )
    acked = message_history.filter(F.col("acked")).select(*MESSAGE_KEY, "ack_ts")
    idle_from = F.greatest("ack_ts", "own_previous", "reading_since")
    gaps = (
        walked.filter(F.col("seq").isNotNull())
        .join(acked, MESSAGE_KEY, how="inner")
        .withColumn("idle_from", idle_from)
        .withColumn("waited_ms", to_millis(F.col("idle_from"), F.col("ts")))
        .filter(
            (F.col("waited_ms") > pipeline.stuck_key_ms)
            & (F.col("other_receipt") > F.col("idle_from"))
        )
        .withColumn("kind", F.lit("stuck_key"))
    )
    blocks = seq_blocks(
        gaps,
        F.count("*").alias("count"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.array_sort(F.collect_set(F.coalesce("key", F.lit("")))).alias("keys"),
        F.array_sort(F.collect_set("consumer")).alias("consumers"),
        F.max("waited_ms").alias("waited_ms"),
    )
    explanation = F.format_string(
        "%s (%s) %s with key(s) %s reached consumer(s) %s of Key_Shared subscription %s only "
        "after it had got nothing for up to %.0f ms since they were acked, while the "
        "subscription's other consumers kept receiving — a stuck key",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        _listed("keys"),
        F.array_join("consumers", ", "),
        F.col("subscription"),
        F.col("waited_ms"),
    )
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
    and key_overlap (per key of a Key_Shared one): the deliveries of each run of deliveries
    to one consumer that came between two of another consumer's, in seq blocks."""
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
    runs = numbered.groupBy(*group, "run", "consumer").agg(
        F.min("ts").alias("run_first_ts"), F.max("ts").alias("run_last_ts")
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
    flagged = numbered.join(F.broadcast(interleaved), [*group, "run"], how="inner")
    found = flagged.withColumn(
        "kind", F.when(F.col("per_key"), "key_overlap").otherwise("failover_overlap")
    )
    gap = to_millis(F.col("holder_before"), F.col("holder_after"))
    blocks = seq_blocks(
        found,
        F.count("*").alias("count"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.array_sort(F.collect_set("consumer")).alias("consumers"),
        F.array_sort(F.collect_set("holder")).alias("holders"),
        F.array_sort(F.collect_set("unit")).alias("units"),
        F.max(gap).alias("gap_ms"),
    )
    held = F.when(
        F.col("kind") == "key_overlap", F.format_string("key(s) %s", _listed("units"))
    ).otherwise(F.lit("the partition"))
    explanation = F.format_string(
        "%s (%s) %s went to consumer(s) %s of %s subscription %s while consumer(s) %s held %s: "
        "each came between two of the holder's deliveries at most %.1f ms apart (the limit "
        "is %d ms: no reconnect fits in between) — two consumers served %s at once",
        plural("count", "delivery", "deliveries"),
        seq_range(),
        from_producer(),
        F.array_join("consumers", ", "),
        F.when(F.col("kind") == "key_overlap", "Key_Shared").otherwise("Failover"),
        F.col("subscription"),
        F.array_join("holders", ", "),
        held,
        F.col("gap_ms"),
        F.lit(pipeline.ownership_gap_ms),
        held,
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))
