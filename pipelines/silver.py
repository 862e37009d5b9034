"""Silver: one row per delivery, in each consumer's own order, and one row per message."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.common import (
    EVENT_ORDER,
    MESSAGE_KEY,
    SUBSCRIPTION_ENTRY,
    event_order,
    is_ack,
    is_attached,
    is_end,
    is_nack,
    is_receive,
    is_send,
    message_id,
    to_millis,
)
from pulsar_audit.attribution import with_sole_producer
from pulsar_audit.schemas import DELIVERY, MESSAGE_HISTORY, MESSAGE_ID, conform


def resolve_receives(consumer_events: DataFrame, producer_events: DataFrame) -> DataFrame:
    """Receive events with `producer` filled in where the topic has one producer.

    `producer` stays null where it cannot be resolved: those rows are counted, not dropped
    (see `count_unattributed`).
    """
    receives = consumer_events.filter(is_receive()).select(
        "run_id",
        "topic",
        "partition",
        F.coalesce("subscription", "client").alias("subscription"),
        F.col("client").alias("consumer"),
        "producer",
        "seq",
        "ts",
        "event_index",
        "source_file",
        "line_number",
        "ledger_id",
        "entry_id",
        "batch_index",
        F.coalesce("redelivery_count", F.lit(0)).alias("redelivery_count"),
        dispatch_key().alias("key"),
    )
    return with_sole_producer(receives, producer_events)


def dispatch_key() -> Column:
    """What Key_Shared dispatches a message by: its ordering key when set, else its key."""
    return F.coalesce("ordering_key", "key")


def build_delivery(resolved_receives: DataFrame) -> DataFrame:
    """silver.delivery: attributed receives numbered in each consumer's own order (0, 1, ...)."""
    in_consumer_order = (
        W.partitionBy("run_id", "topic", "partition", "consumer")
        .orderBy(*EVENT_ORDER)
        .rowsBetween(W.unboundedPreceding, W.currentRow)
    )
    return conform(
        resolved_receives.filter(F.col("producer").isNotNull()).withColumn(
            "delivery_index", F.row_number().over(in_consumer_order) - 1
        ),
        DELIVERY,
    )


def count_unattributed(resolved_receives: DataFrame) -> DataFrame:
    """(run_id, topic, subscription, unattributed): receives whose producer is unknown."""
    return (
        resolved_receives.filter(F.col("producer").isNull())
        .groupBy("run_id", "topic", "subscription")
        .agg(F.count("*").alias("unattributed"))
    )


def consumer_status(consumer_events: DataFrame) -> DataFrame:
    """One row per (run, topic, consumer): its subscription, whether it has an `end` event,
    the subscription types its events name and whether any of its receives has a key.

    A `subscribe` (the consumer attached) makes it a consumer of the run even when it
    received nothing. An `end` may omit the subscription: it then takes the one of the
    consumer's receives, and a consumer that received nothing is its own subscription (as a
    Reader is).
    """
    events = consumer_events.select(
        "run_id",
        "topic",
        F.col("client").alias("consumer"),
        "subscription",
        "event",
        "subscription_type",
        F.when(is_receive(), dispatch_key()).alias("key"),
    )
    subscribed = (
        events.filter(is_attached())
        .groupBy(
            "run_id",
            "topic",
            "consumer",
            F.coalesce("subscription", "consumer").alias("subscription"),
        )
        .agg(
            F.collect_set("subscription_type").alias("types"),
            F.bool_or(F.col("key").isNotNull()).alias("keyed"),
        )
    )
    ended = (
        events.filter(is_end())
        .groupBy("run_id", "topic", "consumer")
        .agg(F.min("subscription").alias("end_subscription"), F.max(F.lit(True)).alias("has_end"))
    )
    return subscribed.join(ended, ["run_id", "topic", "consumer"], how="full").select(
        "run_id",
        "topic",
        "consumer",
        F.coalesce("subscription", "end_subscription", "consumer").alias("subscription"),
        F.coalesce("has_end", F.lit(False)).alias("has_end"),
        F.coalesce("types", F.array().cast("array<string>")).alias("types"),
        F.coalesce("keyed", F.lit(False)).alias("keyed"),
    )


def subscriptions(consumer_events: DataFrame, producer_events: DataFrame) -> DataFrame:
    """One row per (run, topic, subscription): consumers, all_ended, missing_end,
    subscription_type (null when the trace names none, or names several: then `types` lists
    them) and keyed (some receive has a key).

    A topic that no consumer traced gets subscription "" with no consumers, so that it
    still gets a verdict ("unknown") instead of vanishing from the summary.
    """
    has_end = F.col("has_end")
    traced = (
        consumer_status(consumer_events)
        .groupBy("run_id", "topic", "subscription")
        .agg(
            F.count("*").alias("consumers"),
            F.bool_and(has_end).alias("all_ended"),
            F.array_sort(F.collect_list(F.when(~has_end, F.col("consumer")))).alias("missing_end"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("types")))).alias("types"),
            F.bool_or("keyed").alias("keyed"),
        )
        .withColumn("subscription_type", F.when(F.size("types") == 1, F.element_at("types", 1)))
    )
    untraced = (
        producer_events.select("run_id", "topic")
        .distinct()
        .join(traced.select("run_id", "topic"), ["run_id", "topic"], how="left_anti")
        .select(
            "run_id",
            "topic",
            F.lit("").alias("subscription"),
            F.lit(0).cast("long").alias("consumers"),
            F.lit(False).alias("all_ended"),
            F.array().cast("array<string>").alias("missing_end"),
            F.array().cast("array<string>").alias("types"),
            F.lit(False).alias("keyed"),
            F.lit(None).cast("string").alias("subscription_type"),
        )
    )
    return traced.unionByName(untraced)


def is_stored() -> Column:
    """The event names a stored copy (ledger_id ≥ 0); -1:-1 is deduplication's 'dropped'."""
    return F.col("ledger_id") >= 0


def _producer_side(producer_events: DataFrame) -> DataFrame:
    """Per message: first send, first ack (with its MessageId), first nack, acked copies."""
    order = event_order()
    first_ack = F.min_by(F.struct("ts", message_id().alias("id")), F.when(is_ack(), order))
    first_nack = F.min_by(F.struct("ts", "error"), F.when(is_nack(), order))
    return (
        producer_events.filter(F.col("seq").isNotNull())
        .withColumnRenamed("client", "producer")
        .groupBy(*MESSAGE_KEY)
        .agg(
            F.bool_or(is_send()).alias("sent"),
            F.min_by("ts", F.when(is_send(), order)).alias("send_ts"),
            F.bool_or(is_ack()).alias("acked"),
            first_ack.alias("first_ack"),
            F.bool_or(is_nack()).alias("has_nack"),
            first_nack.alias("first_nack"),
            # an ack of -1:-1 says the broker dropped the message as a duplicate: not a copy
            F.collect_set(F.when(is_ack() & is_stored(), message_id())).alias("acked_copies"),
            F.min_by(dispatch_key(), F.when(is_send(), order)).alias("sent_key"),
        )
    )


def _delivery_side(delivery: DataFrame) -> DataFrame:
    """Per message: deliveries per subscription and the MessageIds it was delivered under."""
    per_subscription = delivery.groupBy(*MESSAGE_KEY, "subscription").agg(
        F.count("*").alias("deliveries"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.collect_set(message_id()).alias("ids"),
        F.min("key").alias("key"),
    )
    entry = F.struct(*SUBSCRIPTION_ENTRY)
    return per_subscription.groupBy(*MESSAGE_KEY).agg(
        F.array_sort(F.collect_list(entry)).alias("subscriptions"),
        F.array_distinct(F.flatten(F.collect_list("ids"))).alias("delivered_copies"),
        F.min("key").alias("delivered_key"),
    )


def build_message_history(producer_events: DataFrame, delivery: DataFrame) -> DataFrame:
    """silver.message_history: one row per message seen by its producer or any consumer.

    nack_ts / nack_error keep the first nack even when a later ack makes `nacked` false.
    """
    acked = F.coalesce("acked", F.lit(False))
    no_copies = F.array().cast(T.ArrayType(MESSAGE_ID, False))
    copies = F.concat(
        F.coalesce("acked_copies", no_copies), F.coalesce("delivered_copies", no_copies)
    )
    merged = _producer_side(producer_events).join(_delivery_side(delivery), MESSAGE_KEY, how="full")
    return conform(
        merged.select(
            *MESSAGE_KEY,
            F.coalesce("sent", F.lit(False)).alias("sent"),
            "send_ts",
            acked.alias("acked"),
            F.col("first_ack.ts").alias("ack_ts"),
            to_millis(F.col("send_ts"), F.col("first_ack.ts")).alias("ack_latency_ms"),
            F.col("first_ack.id").alias("ack_id"),
            (F.coalesce("has_nack", F.lit(False)) & ~acked).alias("nacked"),
            F.col("first_nack.ts").alias("nack_ts"),
            F.col("first_nack.error").alias("nack_error"),
            F.array_sort(F.array_distinct(copies)).alias("copies"),
            F.coalesce("subscriptions", F.array()).alias("subscriptions"),
            F.coalesce("sent_key", "delivered_key").alias("key"),
        ),
        MESSAGE_HISTORY,
    )
