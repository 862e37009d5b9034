"""Column helpers and small transforms shared by the silver and gold steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.schemas import ANOMALIES, CAUSE, MESSAGE_ID, conform

# A message is (run_id, topic, partition, producer, seq).
MESSAGE_KEY = ["run_id", "topic", "partition", "producer", "seq"]
# a message as one subscription sees it
SUBSCRIBED_MESSAGE = [*MESSAGE_KEY, "subscription"]
# An anomaly block is one contiguous seq range of one kind under this key.
BLOCK_KEY = ["run_id", "topic", "subscription", "partition", "producer", "kind"]
# What message_history's `subscriptions` holds for each subscription a message reached.
SUBSCRIPTION_ENTRY = ["subscription", "deliveries", "first_ts", "last_ts"]
# A client's own order: ts, ties broken by event_index, then input position for determinism.
EVENT_ORDER = ["ts", "event_index", "source_file", "line_number"]
# A topic partition of a run; a reader of it (one consumer's deliveries there); a MessageId.
TOPIC_PARTITION = ["run_id", "topic", "partition"]
READER = [*TOPIC_PARTITION, "consumer"]
ID = ["ledger_id", "entry_id", "batch_index"]


# Conditions are functions: a Column needs an active Spark session, import time has none.
def is_send() -> Column:
    return F.col("event") == "send"


def is_ack() -> Column:
    return F.col("event") == "ack"


def is_nack() -> Column:
    return F.col("event") == "nack"


def is_receive() -> Column:
    return F.col("event") == "receive"


def is_attached() -> Column:
    """A receive or a `subscribe`: an event that names (or, without a subscription, is) the
    consumer's subscription (`silver.consumer_status`)."""
    return is_receive() | (F.col("event") == "subscribe")


def is_end() -> Column:
    return F.col("event") == "end"


def event_order() -> Column:
    """The event's position in its client's stream, as one orderable struct."""
    return F.struct(*[F.col(c) for c in EVENT_ORDER])


def message_id() -> Column:
    """The stored copy's MessageId (ledger, entry, batch), or null when the event has none."""
    return F.when(
        F.col("ledger_id").isNotNull(),
        F.struct(
            F.col("ledger_id").alias("ledger_id"),
            F.col("entry_id").alias("entry_id"),
            F.col("batch_index").alias("batch_index"),
        ),
    )


def to_millis(start: Column, end: Column) -> Column:
    """Milliseconds from `start` to `end`, keeping microsecond precision."""
    return (F.unix_micros(end) - F.unix_micros(start)) / F.lit(1000.0)


def stable_id(*columns: Column | str) -> Column:
    """A deterministic id: sha2 of the natural key, so re-runs give identical ids."""
    parts = [F.coalesce(F.col(c) if isinstance(c, str) else c, F.lit("")) for c in columns]
    return F.sha2(F.concat_ws("\u0001", *[p.cast("string") for p in parts]), 256)


def no_causes() -> Column:
    """Empty `causes`: the seam where root-cause correlation (a later issue) fills them in."""
    return F.array().cast(T.ArrayType(CAUSE, False))


def seq_range(seq_from: Column | str = "seq_from", seq_to: Column | str = "seq_to") -> Column:
    """'seq 7' or 'seq 7–12'."""
    lo = F.col(seq_from) if isinstance(seq_from, str) else seq_from
    hi = F.col(seq_to) if isinstance(seq_to, str) else seq_to
    return F.when(lo == hi, F.format_string("seq %d", lo)).otherwise(
        F.format_string("seq %d–%d", lo, hi)
    )


def plural(n: Column | str, one: str, many: str) -> Column:
    """'1 message' or '3 messages'."""
    count = F.col(n) if isinstance(n, str) else n
    return F.concat_ws(" ", count.cast("string"), F.when(count == 1, one).otherwise(many))


def was_or_were(count: str) -> Column:
    return F.when(F.col(count) == 1, "was").otherwise("were")


def from_producer() -> Column:
    """'from producer p1' or 'from producer p1 on partition 3' for a partitioned topic."""
    return F.when(
        F.col("partition") >= 0,
        F.format_string("from producer %s on partition %d", F.col("producer"), F.col("partition")),
    ).otherwise(F.format_string("from producer %s", F.col("producer")))


def delivered_to(message_history: DataFrame) -> DataFrame:
    """One row per (message, subscription it was delivered to): the message's own columns and,
    from its `subscriptions` entry, subscription, deliveries, first_ts and last_ts.

    Read from silver.message_history alone (one narrow pass): the per-message detectors
    need no scan or shuffle of silver.delivery."""
    entry = F.explode("subscriptions").alias("entry")
    return message_history.select("*", entry).select(
        *[c for c in message_history.columns if c != "subscriptions"],
        *[F.col(f"entry.{c}").alias(c) for c in SUBSCRIPTION_ENTRY],
    )


def with_seq_block(df: DataFrame, keys: list[str]) -> DataFrame:
    """Add `block`: rows of one contiguous seq range under `keys` share it (gaps and islands).

    dense_rank, not row_number, so that several rows with the same seq stay in one block.
    """
    order = W.partitionBy(*keys).orderBy("seq").rowsBetween(W.unboundedPreceding, W.currentRow)
    return df.withColumn("block", F.col("seq") - F.dense_rank().over(order))


def seq_blocks(df: DataFrame, *aggs: Column, keys: list[str] = BLOCK_KEY) -> DataFrame:
    """One row per contiguous seq range under `keys`, with seq_from, seq_to and `aggs`."""
    return (
        with_seq_block(df, keys)
        .groupBy(*keys, "block")
        .agg(F.min("seq").alias("seq_from"), F.max("seq").alias("seq_to"), *aggs)
    )


def to_anomalies(blocks: DataFrame) -> DataFrame:
    """Finish detector output: deterministic anomaly_id, empty causes, the ANOMALIES columns."""
    return conform(
        blocks.withColumn("anomaly_id", stable_id(*BLOCK_KEY, "seq_from")).withColumn(
            "causes", no_causes()
        ),
        ANOMALIES,
    )


# What a detector's found rows may carry besides BLOCK_KEY and seq (`Found`), with its type: a
# detector leaves out what it does not use, and its blocks have null there.
FOUND_DETAILS: dict[str, T.DataType] = {
    "first_ts": T.TimestampType(),
    "last_ts": T.TimestampType(),
    "consumer": T.StringType(),
    "nacked": T.LongType(),
    "deliveries": T.LongType(),
    "redelivery_count": T.IntegerType(),
    "previous_seq": T.LongType(),
    "previous_id": MESSAGE_ID,
    "highest": MESSAGE_ID,
    "missing_end": T.ArrayType(T.StringType()),
}


@dataclass(frozen=True)
class Found:
    """What one detector found, before it is cut into blocks: one row per finding (BLOCK_KEY,
    seq and the FOUND_DETAILS it fills) and, per kind it finds, the explanation of one block
    (a Column over `block_details`' columns, the block key and seq_from/seq_to)."""

    rows: DataFrame
    explanations: Mapping[str, Column]


def block_details() -> list[Column]:
    """What a block says of its found rows: how many, their time span, the consumers, and
    each detail's sum or highest value."""
    return [
        F.count("*").alias("count"),
        F.min("first_ts").alias("first_ts"),
        F.max("last_ts").alias("last_ts"),
        F.array_sort(F.collect_set("consumer")).alias("consumers"),
        F.sum("nacked").alias("nacked"),
        F.sum("deliveries").alias("deliveries"),
        F.max("redelivery_count").alias("redelivery_count"),
        F.max("previous_seq").alias("previous_seq"),
        F.max("previous_id").alias("previous_id"),
        F.max("highest").alias("highest"),
        F.max("missing_end").alias("missing_end"),
    ]


def blocks_of(found: Sequence[Found]) -> DataFrame:
    """gold.anomalies rows of several detectors at once: their found rows cut into blocks by
    one window and one aggregation (not one of each per detector), each block explained by
    its kind's detector."""
    rows = reduce(
        lambda left, right: left.unionByName(right, allowMissingColumns=True),
        [f.rows for f in found],
    )
    details = [
        F.col(c) if c in rows.columns else F.lit(None).cast(t).alias(c)
        for c, t in FOUND_DETAILS.items()
    ]
    blocks = seq_blocks(rows.select(*BLOCK_KEY, "seq", *details), *block_details())
    cases = [(kind, text) for f in found for kind, text in f.explanations.items()]
    explanation = reduce(
        lambda chain, case: chain.when(F.col("kind") == case[0], case[1]),
        cases[1:],
        F.when(F.col("kind") == cases[0][0], cases[0][1]),
    )
    return to_anomalies(blocks.withColumn("explanation", explanation))
