"""Micro-outages: stretches where a producer had messages in flight and none completed."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, WindowSpec
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import (
    MESSAGE_KEY,
    event_order,
    is_ack,
    is_nack,
    is_send,
    no_causes,
    stable_id,
    to_millis,
)
from pulsar_audit.config import PipelineConfig
from pulsar_audit.schemas import OUTAGES, conform

STREAM = ["run_id", "topic", "partition", "producer"]


def first_send() -> Column:
    """Aggregate: the order of the message's first send (null: never sent)."""
    order = event_order()
    return F.min_by(order, F.when(is_send(), order))


def first_completion() -> Column:
    """Aggregate: the order of the message's first completion, ack or nack (null: none)."""
    order = event_order()
    return F.min_by(order, F.when(is_ack() | is_nack(), order))


def message_orders(producer_events: DataFrame) -> DataFrame:
    """Per message (MESSAGE_KEY, `producer` for the client): `sent_at` and `completed_at`,
    its first send and first completion in the producer's own order."""
    return (
        producer_events.filter(F.col("seq").isNotNull())
        .withColumnRenamed("client", "producer")
        .groupBy(*MESSAGE_KEY)
        .agg(first_send().alias("sent_at"), first_completion().alias("completed_at"))
    )


def changes_of(per_message: DataFrame, counts_send: Column | None = None) -> DataFrame:
    """+1 at each message's send, −1 at its completion: see `in_flight_changes`.

    per_message: `message_orders`'s columns; counts_send: which rows' send is a change here
    (default all; `watch` folds a send into its state once, pipelines/live_state.py)."""
    sent = per_message.filter(F.col("sent_at").isNotNull())
    counted = sent if counts_send is None else sent.filter(counts_send)
    sends = counted.select(*STREAM, F.col("sent_at").alias("ord"), F.lit(1).alias("delta"))
    completions = sent.filter(F.col("completed_at").isNotNull()).select(
        *STREAM,
        F.greatest("sent_at", "completed_at").alias("ord"),
        F.lit(-1).alias("delta"),
    )
    return sends.unionByName(completions)


def in_flight_changes(producer_events: DataFrame) -> DataFrame:
    """+1 at each message's first send, −1 at its first completion (ack or nack).

    A completion of a message never sent is ignored, a message completes once, and a
    completion ordered before its own send is moved right after it, so in-flight never
    goes negative. Columns: STREAM, `ord` (the producer's own order), `delta`.
    """
    return changes_of(message_orders(producer_events))


def nearest_backoff_step(duration_ms: Column, ladder_ms: list[int]) -> Column:
    """1-based index of the ladder value nearest to `duration_ms` (the lower one on a tie)."""
    ladder = F.array(*[F.lit(float(step)) for step in ladder_ms])
    distances = F.transform(
        ladder,
        lambda step, i: F.struct(F.abs(duration_ms - step).alias("distance"), (i + 1).alias("k")),
    )
    return F.array_min(distances)["k"]


def running() -> WindowSpec:
    """Changes in the producer's order; at one position a send comes before a completion."""
    return W.partitionBy(*STREAM).orderBy("ord", F.col("delta").desc())


def completing() -> Column:
    """The change is a completion (ack or nack)."""
    return F.col("delta") == -1


def rising() -> Column:
    """The send that took in-flight from 0 to 1 (an outage can start there)."""
    return (F.col("delta") == 1) & (F.col("in_flight") == 1)


def counted_in_flight(producer_events: DataFrame) -> DataFrame:
    """`in_flight_changes` with `in_flight`: the messages in flight just after each change."""
    return with_in_flight(in_flight_changes(producer_events))


def with_in_flight(changes: DataFrame, before: Column | None = None) -> DataFrame:
    """`changes` with `in_flight` just after each; before: the count in flight before the
    first change (default 0; `watch`'s state carries it over from earlier micro-batches)."""
    so_far = running().rowsBetween(W.unboundedPreceding, W.currentRow)
    start = F.lit(0) if before is None else F.coalesce(before, F.lit(0))
    return changes.withColumn("in_flight", start + F.sum("delta").over(so_far))


def detect_outages(producer_events: DataFrame, pipeline: PipelineConfig) -> DataFrame:
    """gold.outages: for each completion, the stretch since the later of the previous
    completion and the send that took in-flight from 0 to 1; kept when ≥ the threshold."""
    return closed_stretches(counted_in_flight(producer_events), pipeline)


def closed_stretches(
    counted: DataFrame,
    pipeline: PipelineConfig,
    last_completion: Column | None = None,
    last_rise: Column | None = None,
) -> DataFrame:
    """OUTAGES rows of the stretches `counted`'s completions end (`detect_outages`).

    last_completion, last_rise: the latest completion and rise before `counted`'s first
    change (default none; `watch`'s state carries them over from earlier micro-batches)."""
    before = running().rowsBetween(W.unboundedPreceding, -1)
    is_completion, is_rise = completing(), rising()
    no_time = F.lit(None).cast("timestamp")
    stretches = (
        counted.select(
            *STREAM,
            "delta",
            (F.col("in_flight") + 1).alias("in_flight"),
            F.col("ord.ts").alias("end"),
            F.greatest(
                F.max(F.when(is_completion, F.col("ord.ts"))).over(before),
                no_time if last_completion is None else last_completion,
            ).alias("last_completion"),
            F.greatest(
                F.max(F.when(is_rise, F.col("ord.ts"))).over(before),
                no_time if last_rise is None else last_rise,
            ).alias("last_rise"),
        )
        .filter(is_completion)
        .withColumn("start", F.greatest("last_completion", "last_rise"))
        .withColumn("duration_ms", to_millis(F.col("start"), F.col("end")))
        .filter(F.col("duration_ms") >= pipeline.outage_threshold_ms)
    )
    return conform(_explained(stretches, pipeline.backoff_ladder_ms), OUTAGES)


def _explained(stretches: DataFrame, ladder_ms: list[int]) -> DataFrame:
    ladder = F.array(*[F.lit(step) for step in ladder_ms])
    step = nearest_backoff_step(F.col("duration_ms"), ladder_ms)
    who = F.when(
        F.col("partition") >= 0,
        F.format_string("producer %s on partition %d", F.col("producer"), F.col("partition")),
    ).otherwise(F.format_string("producer %s", F.col("producer")))
    explanation = F.format_string(
        "%s had %d message(s) in flight and none completed for %.1f ms — as long as step %d "
        "(%d ms) of the client's reconnect backoff; what stopped the completions is unknown "
        "unless a cause is listed",
        who,
        F.col("in_flight"),
        F.col("duration_ms"),
        F.col("backoff_step"),
        F.element_at(ladder, F.col("backoff_step")),
    )
    return (
        stretches.withColumn("backoff_step", step)
        .withColumn("explanation", explanation)
        .withColumn("outage_id", stable_id(*STREAM, F.unix_micros("start")))
        .withColumn("causes", no_causes())
    )
