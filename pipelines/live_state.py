"""The streaming state of `watch` (issue 29): what is still open in the runs being written,
folded in one micro-batch of events at a time, so that a micro-batch costs its own events
and what is open, not its runs' whole history.

State (silver.live_state; its parts are the LIVE_* schemas of pulsar_audit/schemas.py):
messages sent and not yet completed, per producer the messages in flight with its last
completion and rise, acked messages a subscription has not got yet, each subscription's
delivered frontier per producer, the traced consumers and whether they ended, each run's
clock. The counting is the batch detectors' own (pipelines/detect_outages.py: `changes_of`,
`with_in_flight`, `closed_stretches`; pipelines/silver.py for deliveries and consumers),
started from the state instead of from zero. Pure transforms; jobs/live_state.py reads and
writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pipelines.common import MESSAGE_KEY, event_order, is_ack, is_attached, is_send
from pipelines.detect_duplicated import detect_duplicated, run_deduplication
from pipelines.detect_outages import (
    STREAM,
    changes_of,
    closed_stretches,
    completing,
    first_completion,
    first_send,
    rising,
    with_in_flight,
)
from pipelines.detect_walk import detect_consumer_walk, with_subscription_type
from pipelines.live import FINDING_KEY, run_clock
from pipelines.silver import build_message_history, consumer_status, subscriptions
from pulsar_audit.config import PipelineConfig
from pulsar_audit.packed import pack, unpacked
from pulsar_audit.schemas import (
    LIVE_AWAITING,
    LIVE_CONSUMERS,
    LIVE_FRONTIER,
    LIVE_IN_FLIGHT,
    LIVE_RUNS,
    LIVE_STATE,
    LIVE_STATE_PARTS,
    LIVE_STREAMS,
    PART,
    conform,
)

SUBSCRIBED = list(FINDING_KEY)  # run_id, topic, subscription, partition, producer
# `fold`'s keep_each: the frames the calls build, each kept, in order
KeepEach = Callable[[list[Callable[[], DataFrame]]], list[DataFrame]]
STATE_TABLES = LIVE_STATE_PARTS  # each part of silver.live_state, and its schema


def state_rows(parts: dict[str, DataFrame]) -> DataFrame:
    """silver.live_state's rows holding `parts` (part name: its frame; any of STATE_TABLES)."""
    return parts_of(pack(parts), list(parts))


def state_part(table: DataFrame, part: str) -> DataFrame:
    """The part `part` (a key of STATE_TABLES) of silver.live_state as read, conformed to its
    schema; a field the part's contract gained since the table was written reads as null (as
    `Lakehouse.read` does for a table's top-level columns)."""
    found = unpacked(table, part)
    added = [f for f in STATE_TABLES[part].fields if f.name not in found.columns]
    if added:
        found = found.select("*", *[F.lit(None).cast(f.dataType).alias(f.name) for f in added])
    return conform(found, STATE_TABLES[part])


def parts_of(table: DataFrame, parts: list[str]) -> DataFrame:
    """The rows of `parts` of a packed frame (pulsar_audit/packed.py) as silver.live_state's
    rows: every part's column, null where the frame has none of it."""
    columns = [
        F.col(name)
        if name in table.columns
        else F.lit(None).cast(LIVE_STATE[name].dataType).alias(name)
        for name in STATE_TABLES
    ]
    return table.filter(F.col(PART).isin(parts)).select(PART, *columns)


@dataclass(frozen=True)
class LiveState:
    """The state's parts, one frame each (`STATE_TABLES`' schemas)."""

    in_flight: DataFrame
    streams: DataFrame
    awaiting: DataFrame
    frontier: DataFrame
    consumers: DataFrame
    runs: DataFrame

    def tables(self) -> dict[str, DataFrame]:
        return dict(zip(STATE_TABLES, self.frames(), strict=True))

    def frames(self) -> tuple[DataFrame, ...]:
        return (
            self.in_flight,
            self.streams,
            self.awaiting,
            self.frontier,
            self.consumers,
            self.runs,
        )

    @staticmethod
    def empty(spark: SparkSession) -> LiveState:
        return LiveState(*(spark.createDataFrame([], s) for s in STATE_TABLES.values()))

    @staticmethod
    def of(table: DataFrame) -> LiveState:
        """The state silver.live_state holds, one frame per part."""
        return LiveState(*(state_part(table, part) for part in STATE_TABLES))

    def as_table(self) -> DataFrame:
        """The state as silver.live_state's rows (one commit writes it whole)."""
        return state_rows(self.tables())


@dataclass(frozen=True)
class Folded:
    """The state after a micro-batch, and the gold.outages rows its completions closed."""

    state: LiveState
    closed_outages: DataFrame


def fold(
    state: LiveState,
    producer_events: DataFrame,
    delivery: DataFrame,
    consumer_events: DataFrame,
    pipeline: PipelineConfig,
    batch_id: int,
    keep: Callable[[DataFrame], DataFrame] = lambda df: df,
    earlier: DataFrame | None = None,
    keep_each: KeepEach | None = None,
) -> Folded:
    """The state once a micro-batch's events are folded in.

    producer_events, consumer_events: the micro-batch's bronze rows; delivery: its receives
    as silver.delivery rows (`pipelines.silver.build_delivery`). keep: applied to what
    several parts of the state are derived from (the per-message aggregate, the counted in-flight
    changes, the consumers) and to the parts read again after the fold (the awaited
    messages, the streams and the runs' clocks: the findings are judged from them beside the
    state's write), so that a caller can compute each once (a checkpoint; with no exchange to
    reuse in a plan that shuffles into one partition, a subtree used twice is computed twice:
    docs/live.md, "Session 57").
    earlier: the bronze producer rows of earlier micro-batches of the runs where
    `new_subscriptions` shows a subscription the state does not know (None: there is none):
    a subscription first seen after messages were acked awaits them too, as the batch
    detectors expect every subscription of a topic to get every acked message.
    keep_each: given calls that each build a frame `keep` is applied to (independent of one
    another), the frames kept, in order; a caller may build and keep them side by side
    (None: one after the other)."""

    def each(*builds: Callable[[], DataFrame]) -> list[DataFrame]:
        if keep_each is not None:
            return keep_each(list(builds))
        return [keep(build()) for build in builds]

    messages, consumers, runs = each(
        lambda: _messages(producer_events, state.in_flight, delivery, state.streams),
        lambda: _consumers(state.consumers, consumer_events),
        lambda: _runs(state.runs, producer_events, consumer_events, batch_id),
    )
    prior = state.streams.select(
        *STREAM,
        F.col("in_flight").alias("before_in_flight"),
        F.col("last_completion").alias("before_completion"),
        F.col("last_rise").alias("before_rise"),
    )
    changes = changes_of(messages, counts_send=F.col("prior_sent_at").isNull())
    counted = keep(
        with_in_flight(changes.join(prior, STREAM, how="left"), F.col("before_in_flight"))
    )
    closed = closed_stretches(counted, pipeline, F.col("before_completion"), F.col("before_rise"))
    streams, awaiting = each(
        lambda: _streams(state.streams, counted, producer_events),
        lambda: _awaiting(
            state, messages, delivery, consumers, _owed(state, consumer_events, earlier)
        ),
    )
    folded = LiveState(
        in_flight=conform(messages.filter(F.col("completed_at").isNull()), LIVE_IN_FLIGHT),
        streams=streams,
        awaiting=awaiting,
        frontier=_frontier(state.frontier, delivery),
        consumers=consumers,
        runs=runs,
    )
    return Folded(folded, closed)


def _sent_upto(streams: DataFrame, producer_events: DataFrame) -> DataFrame:
    """(STREAM, sent_upto): the highest seq each producer has sent, the state's and the
    batch's."""
    batch = (
        producer_events.filter(is_send() & F.col("seq").isNotNull())
        .withColumnRenamed("client", "producer")
        .groupBy(*STREAM)
        .agg(F.max("seq").alias("batch_upto"))
    )
    return (
        streams.select(*STREAM, "sent_upto")
        .join(batch, STREAM, how="full")
        .select(*STREAM, F.greatest("sent_upto", "batch_upto").alias("sent_upto"))
    )


def _messages(
    producer_events: DataFrame, in_flight: DataFrame, delivery: DataFrame, streams: DataFrame
) -> DataFrame:
    """Per message the batch or the state knows open: `sent_at` (the state's send, else the
    batch's), `prior_sent_at` (the state's), `completed_at`, `ack_ts` (the batch's) and
    `delivered_to` with the batch's deliveries.

    A message delivered before any micro-batch brought its send (each client rolls its own
    files, so a consumer's file can land before the producer's) is kept with `sent_at` null
    and its deliveries, while its seq is above the highest its producer has sent
    (`_sent_upto`): once the send and the ack come, the subscriptions that got it do not
    await it. A delivery at or below it of a message not in flight was completed before (the
    usual order) or never sent in the trace: not kept. A completion of a message never sent
    is ignored, as the batch detectors do."""
    batch = _per_message(producer_events)
    prior = in_flight.select(
        *MESSAGE_KEY,
        F.col("sent_at").alias("prior_sent_at"),
        F.col("delivered_to").alias("prior_delivered_to"),
    )
    got = delivery.groupBy(*MESSAGE_KEY).agg(F.collect_set("subscription").alias("got"))
    no_subscriptions = F.array().cast("array<string>")
    sent = F.coalesce("prior_sent_at", "batch_sent_at").isNotNull()
    upto = _sent_upto(streams, producer_events)
    return (
        batch.join(prior, MESSAGE_KEY, how="full")
        .join(got, MESSAGE_KEY, how="full")
        .join(upto, STREAM, how="left")
        .filter(sent | (F.col("seq") > F.coalesce("sent_upto", F.lit(-1))))
        .select(
            *MESSAGE_KEY,
            F.coalesce("prior_sent_at", "batch_sent_at").alias("sent_at"),
            "prior_sent_at",
            "completed_at",
            "ack_ts",
            F.array_union(
                F.coalesce("prior_delivered_to", no_subscriptions),
                F.coalesce("got", no_subscriptions),
            ).alias("delivered_to"),
        )
    )


def _per_message(producer_events: DataFrame) -> DataFrame:
    """(MESSAGE_KEY, batch_sent_at, completed_at, ack_ts): per message of `producer_events`,
    its first send and first completion in the producer's order, and its first ack's ts."""
    return (
        producer_events.filter(F.col("seq").isNotNull())
        .withColumnRenamed("client", "producer")
        .groupBy(*MESSAGE_KEY)
        .agg(
            first_send().alias("batch_sent_at"),
            first_completion().alias("completed_at"),
            F.min_by("ts", F.when(is_ack(), event_order())).alias("ack_ts"),
        )
    )


def new_subscriptions(consumers: DataFrame, consumer_events: DataFrame) -> DataFrame:
    """(run_id, topic, subscription): the subscriptions a micro-batch's receives and
    subscribes show that the state's consumers (LIVE_CONSUMERS) do not hold yet. An `end`
    alone names none: one without its subscription would stand for a subscription named
    after its consumer (`consumer_status`), owed every acked message and never getting one."""
    keys = ["run_id", "topic", "subscription"]
    return (
        consumer_events.filter(is_attached())
        .select("run_id", "topic", F.coalesce("subscription", "client").alias("subscription"))
        .distinct()
        .join(consumers.select(*keys), keys, how="left_anti")
    )


def acked_earlier(producer_events: DataFrame) -> DataFrame:
    """(MESSAGE_KEY, first_ts, ack_ts): the messages `producer_events` (earlier micro-batches'
    rows) show sent and acked, as a new subscription's awaited rows need them."""
    return (
        _per_message(producer_events)
        .filter(
            F.col("batch_sent_at").isNotNull()
            & F.col("completed_at").isNotNull()
            & F.col("ack_ts").isNotNull()
        )
        .select(*MESSAGE_KEY, F.col("batch_sent_at.ts").alias("first_ts"), "ack_ts")
    )


def _streams(streams: DataFrame, counted: DataFrame, producer_events: DataFrame) -> DataFrame:
    """LIVE_STREAMS: per producer, in flight after its last change (0: none; its next send is
    a rise after its latest completion and rise), the latest completion and rise, its latest
    event and the highest seq it has sent. One row per producer stream: the state stays as
    small as the number of producers."""
    last = F.struct("ord", (-F.col("delta")).alias("later"))  # completions after sends
    batch = counted.groupBy(*STREAM).agg(
        F.max_by("in_flight", last).alias("batch_in_flight"),
        F.max(F.when(completing(), F.col("ord.ts"))).alias("completion"),
        F.max(F.when(rising(), F.col("ord.ts"))).alias("rise"),
    )
    seen = (
        producer_events.withColumnRenamed("client", "producer")
        .groupBy(*STREAM)
        .agg(F.max("ts").alias("seen"))
    )
    merged = (
        streams.join(batch, STREAM, how="full")
        .join(seen, STREAM, how="full")
        .join(
            _sent_upto(streams, producer_events).withColumnRenamed("sent_upto", "upto"),
            STREAM,
            how="left",
        )  # fmt: skip
        .select(
            *STREAM,
            F.coalesce("batch_in_flight", "in_flight", F.lit(0)).alias("in_flight"),
            F.greatest("last_completion", "completion").alias("last_completion"),
            F.greatest("last_rise", "rise").alias("last_rise"),
            F.greatest("seen_until", "seen").alias("seen_until"),
            "upto",
        )
        .withColumnRenamed("upto", "sent_upto")
    )
    return conform(merged, LIVE_STREAMS)


def _first_deliveries(delivery: DataFrame) -> DataFrame:
    """(SUBSCRIBED, seq, ts): each message's first delivery to each subscription."""
    return delivery.groupBy(*SUBSCRIBED, "seq").agg(F.min("ts").alias("ts"))


def _owed(
    state: LiveState, consumer_events: DataFrame, earlier: DataFrame | None
) -> DataFrame | None:
    """(SUBSCRIBED, seq, first_ts, ack_ts, passed_at): what the subscriptions new in this
    micro-batch are owed of the messages acked before it (None: nothing to look at). Only
    what the state has folded as completed: a seq its producer has sent (`sent_upto`) and
    not in flight; an acked row of a file the state has not folded yet (ingested by another
    job) waits for its fold, as every ack does."""
    if earlier is None:
        return None
    new = new_subscriptions(state.consumers, consumer_events)
    folded = (
        acked_earlier(earlier)
        .join(state.streams.select(*STREAM, "sent_upto"), STREAM, how="inner")
        .filter(F.col("seq") <= F.col("sent_upto"))
        .join(state.in_flight.select(*MESSAGE_KEY), MESSAGE_KEY, how="left_anti")
    )
    return folded.join(new, ["run_id", "topic"], how="inner").select(
        *SUBSCRIBED, "seq", "first_ts", "ack_ts", F.lit(None).cast("timestamp").alias("passed_at")
    )


def _awaiting(
    state: LiveState,
    messages: DataFrame,
    delivery: DataFrame,
    consumers: DataFrame,
    owed: DataFrame | None = None,
) -> DataFrame:
    """LIVE_AWAITING: the state's rows and the batch's new acks (a row per subscription known
    so far that has not got the message), and `owed` (`_owed`), less what the batch
    delivered; passed_at from the batch's later deliveries (a new row: from the frontier,
    when it is past the seq)."""
    subscriptions = consumers.select("run_id", "topic", "subscription").distinct()
    acked_now = messages.filter(F.col("completed_at").isNotNull() & F.col("ack_ts").isNotNull())
    frontier = state.frontier.select(*SUBSCRIBED, "max_seq", "max_seq_ts")
    new = (
        acked_now.join(subscriptions, ["run_id", "topic"], how="inner")
        .filter(~F.array_contains("delivered_to", F.col("subscription")))
        .join(frontier, SUBSCRIBED, how="left")
        .select(
            *SUBSCRIBED,
            "seq",
            F.coalesce(F.col("sent_at.ts"), F.col("ack_ts")).alias("first_ts"),
            "ack_ts",
            F.when(F.col("max_seq") > F.col("seq"), F.col("max_seq_ts")).alias("passed_at"),
        )
    )
    if owed is not None:  # a message acked again in this batch is awaited once, as acked now
        owed = owed.join(acked_now.select(*MESSAGE_KEY), MESSAGE_KEY, how="left_anti")
        new = new.unionByName(owed)
    first = _first_deliveries(delivery)
    still = (
        state.awaiting.unionByName(new)
        .join(first, [*SUBSCRIBED, "seq"], how="left_anti")
        .distinct()
    )
    return conform(
        _passed_later(still, first).withColumn("passed_at", F.least("passed_at", "later")),
        LIVE_AWAITING,
    )


def _passed_later(awaited: DataFrame, first: DataFrame) -> DataFrame:
    """`awaited` (LIVE_AWAITING rows, none of them in `first`) with `later`: the earliest of
    `first`'s deliveries (`_first_deliveries`) of a higher seq to the same subscription,
    producer and partition (null: none). One window over both, sorted by seq: linear in the
    rows, where a join on seq > seq would pair each awaited message with every later
    delivery (a backlog of thousands against a micro-batch's deliveries)."""
    awaiting = LIVE_AWAITING.fieldNames()
    marked = awaited.select(*awaiting, F.lit(None).cast("timestamp").alias("_delivered"))
    delivered = first.select(
        *[F.col(c) if c in SUBSCRIBED or c == "seq" else F.lit(None).alias(c) for c in awaiting],
        F.col("ts").alias("_delivered"),
    )
    # descending seq, a range frame: every row of a seq at or above this one's (an awaited
    # message is never among the delivered, so "at" adds nothing but itself)
    above = (
        W.partitionBy(*SUBSCRIBED)
        .orderBy(F.col("seq").desc())
        .rangeBetween(W.unboundedPreceding, W.currentRow)
    )
    both = marked.withColumn("_awaited", F.lit(True)).unionByName(
        delivered.withColumn("_awaited", F.lit(False)), allowMissingColumns=False
    )
    return (
        both.withColumn("later", F.min("_delivered").over(above))
        .filter(F.col("_awaited"))
        .select(*awaiting, "later")
    )


def _frontier(frontier: DataFrame, delivery: DataFrame) -> DataFrame:
    """LIVE_FRONTIER: per subscription, producer and partition, the highest seq delivered and
    when it first was."""
    batch = (
        _first_deliveries(delivery)
        .groupBy(*SUBSCRIBED)
        .agg(F.max("seq").alias("max_seq"), F.max_by("ts", "seq").alias("max_seq_ts"))
    )
    highest = F.struct(F.col("max_seq"), (-F.unix_micros("max_seq_ts")).alias("earlier"))
    merged = (
        frontier.unionByName(batch)
        .groupBy(*SUBSCRIBED)
        .agg(F.max_by("max_seq_ts", highest).alias("max_seq_ts"), F.max("max_seq").alias("max_seq"))
    )
    return conform(merged, LIVE_FRONTIER)


def _consumers(consumers: DataFrame, consumer_events: DataFrame) -> DataFrame:
    """LIVE_CONSUMERS: the consumers known so far; a consumer's `end` ends all its rows.

    A consumer whose events in the batch are only an `end` without its subscription keeps
    the subscription(s) the state knows it by: `consumer_status`, seeing the batch alone,
    would name the consumer as its own subscription (a Reader's), a subscription that then
    awaits every later ack and never gets one."""
    keys = ["run_id", "topic", "consumer"]
    status = consumer_status(consumer_events).select(*LIVE_CONSUMERS.fieldNames())
    named = (
        consumer_events.filter(is_attached() | F.col("subscription").isNotNull())
        .select("run_id", "topic", F.col("client").alias("consumer"), F.lit(True).alias("_named"))
        .distinct()
    )
    known = consumers.select(*keys, F.col("subscription").alias("_known"))
    unnamed = F.col("_named").isNull() & F.col("_known").isNotNull()
    batch = (
        status.join(named, keys, how="left")
        .join(known, keys, how="left")
        .select(
            *keys,
            F.when(unnamed, F.col("_known")).otherwise(F.col("subscription")).alias("subscription"),
            "has_end",
        )
    )
    per_consumer = W.partitionBy("run_id", "topic", "consumer").rowsBetween(
        W.unboundedPreceding, W.unboundedFollowing
    )
    merged = (
        consumers.unionByName(batch)
        .groupBy("run_id", "topic", "consumer", "subscription")
        .agg(F.bool_or("has_end").alias("has_end"))
        .withColumn("has_end", F.bool_or("has_end").over(per_consumer))
    )
    return conform(merged, LIVE_CONSUMERS)


def _runs(
    runs: DataFrame, producer_events: DataFrame, consumer_events: DataFrame, batch_id: int
) -> DataFrame:
    """LIVE_RUNS: each run's clock, and the micro-batch that last folded it."""
    batch = run_clock(producer_events, consumer_events).withColumn(
        "folded_batch", F.lit(batch_id).cast("long")
    )
    merged = (
        runs.unionByName(batch)
        .groupBy("run_id")
        .agg(F.max("now").alias("now"), F.max("folded_batch").alias("folded_batch"))
    )
    return conform(merged, LIVE_RUNS)


def ended(consumers: DataFrame) -> DataFrame:
    """(run_id, topic, subscription, all_ended): `pipelines.live.ended_runs`'s input, from
    LIVE_CONSUMERS."""
    return consumers.groupBy("run_id", "topic", "subscription").agg(
        F.bool_and("has_end").alias("all_ended")
    )


def seen_in(
    producer_events: DataFrame,
    consumer_events: DataFrame,
    delivery: DataFrame,
    run_events: DataFrame,
) -> DataFrame:
    """gold.anomalies rows the batch detectors find in a micro-batch's own events: what
    `pipelines.live.seen_as_they_are` opens (a duplicate or a reordering within the batch;
    one whose first half was in an earlier micro-batch waits for the reconciliation).

    run_events: the runs' bronze.run_events (their configs)."""
    typed = with_subscription_type(delivery, subscriptions(consumer_events, producer_events))
    history = build_message_history(producer_events, delivery)
    return detect_consumer_walk(typed).unionByName(
        detect_duplicated(history, run_deduplication(run_events))
    )
