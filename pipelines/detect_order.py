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

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import (
    ID,
    MESSAGE_KEY,
    READER,
    TOPIC_PARTITION,
    Found,
    from_producer,
    plural,
    seq_blocks,
    seq_range,
    to_anomalies,
    was_or_were,
)
from pipelines.poll_skip_readers import PARTITION_FIELDS, suspect_readers
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import ANOMALIES
from pulsar_audit.spark import same_keys


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
    keep: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> DataFrame:
    """Stored messages a consumer jumped over: after its furthest delivery so far it got one
    further than the next stored MessageId. count = skipped messages, blocks by seq.

    subscriptions: (run_id, topic, subscription, consumers), from `pipelines.silver`; on a
    partition that several consumers of one subscription read, each consumer's stored
    MessageIds leave out those another consumer of the subscription received (a Shared
    subscription splits the entries between them). Consumers that read disjoint partitions
    (a Failover or Exclusive subscription per partition) keep the plain, cheaper check.
    ranks: `ranked_ids(message_history)`, when the caller keeps it (it is read four times).
    keep: how the caller keeps the deliveries of the suspect readers
    (`pipelines.poll_skip_readers`), which the checks read several times.

    Runs two Spark jobs while it builds the plan (which readers are suspects: a sort of every
    delivery, a scan of the ranks, small results collected: one row per reader). Every
    MessageId a delivery names must be among message history's copies, as silver builds
    them (`build_message_history` from the same deliveries)."""
    ranks = ranked_ids(message_history) if ranks is None else ranks
    # The exact checks below only for the readers that may have jumped (in a run without
    # skips, none) and, on a split partition, the other readers of their subscription there.
    suspects = suspect_readers(delivery, ranks)
    spark = delivery.sparkSession
    if not suspects:
        # no reader can have jumped: no exact check to build (its plan alone took 2 s of a
        # 10^4 run's driver) for a result known to be empty
        return local_frame(spark, [], ANOMALIES)
    readers = F.broadcast(
        local_frame(spark, [s[:4] for s in suspects], f"{PARTITION_FIELDS}, consumer string")
    )
    partitions = {s[:3] for s in suspects}
    ranks = ranks.join(
        F.broadcast(local_frame(spark, partitions, PARTITION_FIELDS)),
        TOPIC_PARTITION,
        how="left_semi",
    )
    if subscriptions is None:
        skipped = _jumped_over(delivery.join(readers, READER, how="left_semi"), ranks)
    else:
        sub_key = ["run_id", "topic", "subscription"]
        part_key = [*TOPIC_PARTITION, "subscription"]
        groups = {(*s[:3], sub) for s in suspects for sub in s.subscriptions}
        delivery = keep(
            delivery.join(
                F.broadcast(local_frame(spark, groups, f"{PARTITION_FIELDS}, subscription string")),
                part_key,
                how="left_semi",
            )
        )
        several = F.broadcast(subscriptions.filter(F.col("consumers") > 1).select(*sub_key))
        split = F.broadcast(
            delivery.join(several, sub_key, how="left_semi")
            .groupBy(*part_key)
            .agg(F.countDistinct("consumer").alias("readers"))
            .filter(F.col("readers") > 1)
            .select(*part_key)
        )
        alone = delivery.join(split, part_key, how="left_anti").join(
            readers, READER, how="left_semi"
        )
        together = delivery.join(split, part_key, how="left_semi")
        skipped = _jumped_over(alone, ranks).unionByName(_jumped_over_split(together, ranks, split))
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


def _jumped_over_split(delivery: DataFrame, ranks: DataFrame, split: DataFrame) -> DataFrame:
    """`_jumped_over` where several consumers of one subscription read a partition (`split`:
    its topic partitions and subscriptions). A consumer's view is the stored MessageIds no
    other consumer of its subscription received: those nobody received and those only it
    received. Its rank in that view is counted, not built per consumer: for a MessageId only
    it received, the MessageIds nobody received before it plus its own up to it. A jump over
    its view is a jump in that rank; what it jumped over, the view's MessageIds between the
    two stored positions. So the work is per stored MessageId, not per MessageId and
    consumer."""
    part_key = [*TOPIC_PARTITION, "subscription"]
    receivers = delivery.groupBy(*part_key, *ID).agg(
        F.countDistinct("consumer").alias("receivers"), F.min("consumer").alias("only")
    )
    stored = (
        ranks.select(*TOPIC_PARTITION, *ID, F.col("rank").alias("place"))
        .join(F.broadcast(split), TOPIC_PARTITION)
        .distinct()
    )
    by_place = W.partitionBy(*part_key).orderBy("place")
    by_id = (
        stored.alias("s")
        .join(receivers.alias("o"), same_keys([*part_key, *ID], "s", "o"), how="left")
        .select("s.*", "o.receivers", "o.only")
        .withColumn(
            "nobody_before",
            F.count(F.when(F.col("receivers").isNull(), 1)).over(
                by_place.rowsBetween(W.unboundedPreceding, W.currentRow)
            ),
        )
    )
    own = (
        by_id.filter(F.col("receivers") == 1)
        .withColumn(
            "rank",
            F.col("nobody_before")
            + F.row_number().over(W.partitionBy(*part_key, "only").orderBy("place")),
        )
        .select(*part_key, *ID, "place", "rank", F.col("only").alias("consumer"))
    )
    # a walk per view: a consumer of two split subscriptions of a partition walks each apart
    consumer_order = (
        W.partitionBy(*part_key, "consumer")
        .orderBy("delivery_index")
        .rowsBetween(W.unboundedPreceding, -1)
    )
    jumps = (
        delivery.join(own, [*part_key, "consumer", *ID], "inner")
        .withColumn("furthest", F.max("rank").over(consumer_order))
        .withColumn("furthest_place", F.max("place").over(consumer_order))
        .filter(F.col("rank") > F.col("furthest") + 1)
        .select(
            *part_key,
            "consumer",
            F.col("furthest_place").alias("after"),
            F.col("place").alias("before"),
            F.col("ts").alias("jump_ts"),
        )
    )
    between = (F.col("r.rank") > F.col("j.after")) & (F.col("r.rank") < F.col("j.before"))
    for key in TOPIC_PARTITION:
        between = between & (F.col(f"r.{key}") == F.col(f"j.{key}"))
    candidates = ranks.alias("r").join(F.broadcast(jumps.alias("j")), between, "inner")
    same_id = same_keys([*TOPIC_PARTITION, *ID], "r", "o")
    received = candidates.join(
        receivers.alias("o"), same_id & (F.col("j.subscription") == F.col("o.subscription")), "left"
    )
    nobody_or_itself = F.col("o.receivers").isNull() | (
        (F.col("o.receivers") == 1) & (F.col("o.only") == F.col("j.consumer"))
    )
    return received.filter(nobody_or_itself).select(
        *[F.col(f"r.{c}") for c in MESSAGE_KEY], "j.subscription", "j.consumer", "j.jump_ts"
    )


def _jumped_over(delivery: DataFrame, ranks: DataFrame) -> DataFrame:
    """(MESSAGE_KEY, subscription, consumer, jump_ts) per stored MessageId a consumer jumped
    over; jump_ts: when it received the message past the hole (the block's time, where the
    cause of the skip lies).

    ranks: `ranked_ids`, the stored MessageIds ranked per partition."""
    consumer_order = (
        W.partitionBy(*TOPIC_PARTITION, "consumer")
        .orderBy("delivery_index")
        .rowsBetween(W.unboundedPreceding, -1)
    )
    jumps = (
        delivery.join(ranks.select(*TOPIC_PARTITION, *ID, "rank"), [*TOPIC_PARTITION, *ID])
        .withColumn("furthest", F.max("rank").over(consumer_order))
        .filter(F.col("rank") > F.col("furthest") + 1)
        .select(
            *TOPIC_PARTITION,
            "subscription",
            "consumer",
            (F.col("furthest") + 1).alias("skip_from"),
            (F.col("rank") - 1).alias("skip_to"),
            F.col("ts").alias("jump_ts"),
        )
    )
    in_jump = F.col("r.rank").between(F.col("j.skip_from"), F.col("j.skip_to"))
    for key in TOPIC_PARTITION:
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
