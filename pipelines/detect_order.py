"""Two anomalies named by Jepsen's Kafka/Redpanda queue checker:

- poll skip: a consumer's MessageIds jump over stored messages (MessageIds some producer ack or
  some consumer delivery shows to exist) that it had not received yet — whether it gets them
  later or never. A reader on a broker with autoSkipNonRecoverableData skipping an unreadable
  fragment is one. What another consumer of the same subscription received is not skipped: a
  Shared subscription splits the entries between its consumers.
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
    Found,
    from_producer,
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


def detect_poll_skip(
    message_history: DataFrame,
    delivery: DataFrame,
    subscriptions: DataFrame | None = None,
    ranks: DataFrame | None = None,
) -> DataFrame:
    """Stored messages a consumer jumped over: after its furthest delivery so far it got one
    further than the next stored MessageId. count = skipped messages, blocks by seq.

    subscriptions: (run_id, topic, subscription, consumers), from `pipelines.silver`; on a
    partition that several consumers of one subscription read, each consumer's stored
    MessageIds leave out those another consumer of the subscription received (a Shared
    subscription splits the entries between them). Consumers that read disjoint partitions
    (a Failover or Exclusive subscription per partition) keep the plain, cheaper check.
    ranks: `ranked_ids(message_history)`, when the caller keeps it (it is read four times)."""
    ranks = ranked_ids(message_history) if ranks is None else ranks
    if subscriptions is None:
        skipped = _jumped_over(delivery, ranks, TOPIC_PARTITION)
    else:
        sub_key = ["run_id", "topic", "subscription"]
        part_key = [*TOPIC_PARTITION, "subscription"]
        several = F.broadcast(subscriptions.filter(F.col("consumers") > 1).select(*sub_key))
        split = F.broadcast(
            delivery.join(several, sub_key, how="left_semi")
            .groupBy(*part_key)
            .agg(F.countDistinct("consumer").alias("readers"))
            .filter(F.col("readers") > 1)
            .select(*part_key)
        )
        alone = delivery.join(split, part_key, how="left_anti")
        together = delivery.join(split, part_key, how="left_semi")
        views = consumer_views(ranks, together)
        skipped = _jumped_over(alone, ranks, TOPIC_PARTITION).unionByName(
            _jumped_over(together, views, [*TOPIC_PARTITION, "subscription", "consumer"])
        )
    # One row per message a consumer skipped (its earliest jump, so a rerun gives the same time).
    skipped = (
        skipped.groupBy(*MESSAGE_KEY, "subscription", "consumer")
        .agg(F.min("jump_ts").alias("jump_ts"))
        .withColumn("kind", F.lit("poll_skip"))
    )
    blocks = seq_blocks(
        skipped,
        F.countDistinct("seq").alias("count"),
        F.array_sort(F.collect_set("consumer")).alias("consumers"),
        F.min("jump_ts").alias("first_ts"),
        F.max("jump_ts").alias("last_ts"),
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


def consumer_views(ranks: DataFrame, delivery: DataFrame) -> DataFrame:
    """Per consumer of `delivery`: the stored MessageIds no other consumer of its subscription
    received, ranked in storage order (ranks' columns plus subscription and consumer)."""
    members = delivery.select(*TOPIC_PARTITION, "subscription", "consumer").distinct()
    receivers = delivery.groupBy(*TOPIC_PARTITION, "subscription", *ID).agg(
        F.collect_set("consumer").alias("receivers")
    )
    same_id = [
        F.col(f"v.{c}").eqNullSafe(F.col(f"o.{c}")) for c in [*TOPIC_PARTITION, "subscription", *ID]
    ]
    condition = same_id[0]
    for part in same_id[1:]:
        condition = condition & part
    only_by_itself = F.forall("o.receivers", lambda receiver: receiver == F.col("v.consumer"))
    view = (
        ranks.drop("rank")
        .join(F.broadcast(members), TOPIC_PARTITION, how="inner")
        .alias("v")
        .join(receivers.alias("o"), condition, how="left")
        .filter(F.col("o.receivers").isNull() | only_by_itself)
        .select("v.*")
    )
    in_storage_order = (
        W.partitionBy(*TOPIC_PARTITION, "subscription", "consumer")
        .orderBy(*ID)
        .rowsBetween(W.unboundedPreceding, W.currentRow)
    )
    return view.withColumn("rank", F.dense_rank().over(in_storage_order))


def _jumped_over(delivery: DataFrame, ranks: DataFrame, keys: list[str]) -> DataFrame:
    """(MESSAGE_KEY, subscription, consumer, jump_ts) per stored MessageId a consumer jumped
    over; jump_ts: when it received the message past the hole (the block's time, where the
    cause of the skip lies).

    ranks: MESSAGE_KEY, ID and rank, ranked per `keys` (a partition, or a consumer's view)."""
    consumer_order = (
        W.partitionBy(*TOPIC_PARTITION, "consumer")
        .orderBy("delivery_index")
        .rowsBetween(W.unboundedPreceding, -1)
    )
    jumps = (
        delivery.join(ranks.select(*keys, *ID, "rank"), [*keys, *ID], "inner")
        .withColumn("furthest", F.max("rank").over(consumer_order))
        .filter(F.col("rank") > F.col("furthest") + 1)
        .select(
            *dict.fromkeys([*keys, "subscription", "consumer"]),
            (F.col("furthest") + 1).alias("skip_from"),
            (F.col("rank") - 1).alias("skip_to"),
            F.col("ts").alias("jump_ts"),
        )
    )
    in_jump = F.col("r.rank").between(F.col("j.skip_from"), F.col("j.skip_to"))
    for key in keys:
        in_jump = in_jump & (F.col(f"r.{key}") == F.col(f"j.{key}"))
    return (
        ranks.alias("r")
        .join(F.broadcast(jumps.alias("j")), in_jump, "inner")
        .select(
            *[F.col(f"r.{c}") for c in MESSAGE_KEY], "j.subscription", "j.consumer", "j.jump_ts"
        )
    )


def nonmonotonic_sends(message_history: DataFrame) -> Found:
    """Acked messages whose MessageId is lower than that of a message the same producer sent
    before it on the same partition (Jepsen's non-monotonic send: by the producer's send
    order, not by when the acks arrived — acks of one batch reach the callbacks in any order).

    Send order: send_ts, ties (millisecond clocks) broken by seq. A message without a send
    has no place in that order and is left out (the trace then fails a table check and the
    run is unknown)."""
    stream = ["run_id", "topic", "partition", "producer"]
    sent_before = (
        W.partitionBy(*stream).orderBy("send_order", "seq").rowsBetween(W.unboundedPreceding, -1)
    )
    acks = (
        message_history.filter(
            F.col("acked") & F.col("send_ts").isNotNull() & (F.col("ack_id.ledger_id") >= 0)
        )
        .select(
            *stream,
            "seq",
            F.col("ack_ts").alias("ts"),
            F.col("send_ts").alias("send_order"),
            F.col("ack_id").alias("id"),
        )
        .withColumn("highest", F.max("id").over(sent_before))
    )
    backwards = acks.filter(F.col("id") < F.col("highest")).select(
        "run_id",
        "topic",
        F.lit(None).cast("string").alias("subscription"),
        "partition",
        "producer",
        "seq",
        F.lit("nonmonotonic_send").alias("kind"),
        F.col("ts").alias("first_ts"),
        F.col("ts").alias("last_ts"),
        "highest",
    )
    explanation = F.format_string(
        "%s (%s) %s %s acked with a MessageId lower than that of a message the producer sent "
        "earlier (up to %d:%d) — a non-monotonic send (Jepsen): a later send on one partition "
        "must get a higher MessageId",
        plural("count", "message", "messages"),
        seq_range(),
        from_producer(),
        was_or_were("count"),
        F.col("highest.ledger_id"),
        F.col("highest.entry_id"),
    )
    return Found(backwards, {"nonmonotonic_send": explanation})
