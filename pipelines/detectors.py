"""One detector per anomaly kind: together they give one ANOMALIES row per contiguous seq block.

The kinds whose block is a plain count and time span return what they found
(`pipelines.common.Found`), cut into blocks together by `blocks_of`; the others return their
blocks. Detectors leave `causes` empty; root-cause correlation fills them in later.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.common import (
    MESSAGE_KEY,
    SUBSCRIBED_MESSAGE,
    Found,
    blocks_of,
    delivered_to,
    from_producer,
    plural,
    seq_range,
    was_or_were,
)
from pipelines.detect_duplicated import detect_duplicated
from pipelines.detect_ids import detect_inconsistent_ids
from pipelines.detect_keys import detect_key_order, detect_ownership_overlap, detect_stuck_keys
from pipelines.detect_order import detect_poll_skip, nonmonotonic_sends, ranked_ids
from pipelines.detect_walk import ORDERED_TYPES, consumer_walk, with_subscription_type
from pulsar_audit.config import PipelineConfig

# What the typed detectors need to find something (`typed_checks`): a subscription that names
# a type, a keyed Key_Shared one, a Failover one; and what poll skip's per-consumer views need:
# a subscription with several consumers (without one, each partition's readers read it alone).
TYPED, KEY_SHARED, FAILOVER = "typed", "key_shared", "failover"
SEVERAL_CONSUMERS = "several_consumers"
EVERY_CHECK = frozenset({TYPED, KEY_SHARED, FAILOVER, SEVERAL_CONSUMERS})


def typed_checks(subscriptions: DataFrame) -> frozenset[str]:
    """Which typed checks `subscriptions` (one row per subscription) calls for: a small
    aggregate, collected, so that a trace without types builds none of their plans."""
    kind = F.col("subscription_type")
    row = subscriptions.agg(
        F.bool_or(kind.isNotNull()).alias(TYPED),
        F.bool_or((kind == "Key_Shared") & F.col("keyed")).alias(KEY_SHARED),
        F.bool_or(kind == "Failover").alias(FAILOVER),
        F.bool_or(F.col("consumers") > 1).alias(SEVERAL_CONSUMERS),
    ).first()
    return frozenset(name for name in EVERY_CHECK if row is not None and row[name])


def lost_or_unseen(message_history: DataFrame, subscriptions: DataFrame) -> Found:
    """Acked messages a subscription never got: `lost` if all its consumers ended, else `unseen`."""
    topic_subscriptions = F.broadcast(
        subscriptions.select("run_id", "topic", "subscription", "all_ended", "missing_end")
    )
    got_it = F.exists("subscriptions", lambda s: s["subscription"] == F.col("subscription"))
    missing = (
        message_history.filter(F.col("acked"))
        .select(*MESSAGE_KEY, "send_ts", "ack_ts", "subscriptions")
        .join(topic_subscriptions, ["run_id", "topic"], how="inner")
        .filter(~got_it)
        .select(
            *SUBSCRIBED_MESSAGE,
            F.when(F.col("all_ended"), "lost").otherwise("unseen").alias("kind"),
            F.coalesce("send_ts", "ack_ts").alias("first_ts"),
            F.col("ack_ts").alias("last_ts"),
            "missing_end",
        )
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
    return Found(
        missing,
        {"lost": lost, "unseen": F.when(F.col("subscription") == "", untraced).otherwise(unseen)},
    )


def redelivered(delivery: DataFrame) -> Found:
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
        .select(
            *SUBSCRIBED_MESSAGE,
            F.lit("redelivered").alias("kind"),
            "deliveries",
            "first_ts",
            "last_ts",
            "redelivery_count",
        )
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
    return Found(pairs, {"redelivered": explanation})


def unacked_received(message_history: DataFrame) -> Found:
    """Delivered messages the producer never saw acked (informational, not a violation)."""
    unacked = delivered_to(message_history.filter(~F.col("acked"))).select(
        *SUBSCRIBED_MESSAGE,
        F.lit("unacked_received").alias("kind"),
        F.col("nacked").cast("long").alias("nacked"),
        "first_ts",
        "last_ts",
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
    return Found(unacked, {"unacked_received": explanation})


def detect_anomalies(
    message_history: DataFrame,
    delivery: DataFrame,
    subscriptions: DataFrame,
    deduplication: DataFrame,
    joins: DataFrame,
    pipeline: PipelineConfig,
    checks: frozenset[str] = EVERY_CHECK,
    keep: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> DataFrame:
    """gold.anomalies: every detector's rows.

    subscriptions: from `pipelines.silver.subscriptions` (with each subscription's type:
    which order checks apply, docs/subscription-types.md); deduplication: from
    `pipelines.detect_duplicated.run_deduplication`; joins: consumers' `subscribe` events
    (`pipelines.detect_keys.consumer_joins`); pipeline: the thresholds; checks: the typed
    checks to build (`typed_checks`; a detector or branch left out would have found nothing); keep:
    how the job keeps a frame that several detectors' reads would otherwise recompute (the
    deliveries in order, the stored MessageIds' ranks: the poll skip reads each four times;
    the deliveries of the readers it suspects of a skip).

    Not wholly lazy: the poll skip finds which readers it must check exactly with two Spark
    jobs while the plan is built (`pipelines.poll_skip_readers`; collected, one row per
    reader).
    """
    if TYPED in checks:
        typed = with_subscription_type(delivery, subscriptions)
    else:
        typed = delivery.withColumn("subscription_type", F.lit(None).cast("string"))
    kind = F.col("subscription_type")
    in_order = keep(typed.filter(kind.isNull() | kind.isin(*ORDERED_TYPES)))
    # the kinds whose blocks are a plain count and time span: cut into blocks together
    simple = [
        lost_or_unseen(message_history, subscriptions),
        redelivered(delivery),
        consumer_walk(typed),
        unacked_received(message_history),
        nonmonotonic_sends(message_history),
    ]
    found = [
        blocks_of(simple),
        detect_duplicated(message_history, deduplication),
        detect_poll_skip(
            message_history,
            in_order.drop("subscription_type"),
            subscriptions if SEVERAL_CONSUMERS in checks else None,
            keep(ranked_ids(message_history)),
            keep,
        ),
        detect_inconsistent_ids(message_history),
    ]
    if KEY_SHARED in checks:
        found.append(detect_key_order(message_history, subscriptions))
        found.append(detect_stuck_keys(message_history, delivery, subscriptions, joins, pipeline))
    if KEY_SHARED in checks or FAILOVER in checks:
        found.append(detect_ownership_overlap(delivery, subscriptions, pipeline))
    return reduce(DataFrame.unionByName, found)
