"""Client consumer events without a topic → the topic (and subscription) of their consumer.

Two kinds of consumer line name no topic:

* the C++ client 3.2 and 3.3 print the pointer of the topic's string where the topic belongs
  (`[0x55d1c2a8e0f0, sub, 0] Schedule reconnection in 0.1 s`); every line of one consumer
  carries the same pointer. The consumer's `Created consumer on broker [local -> remote]` line
  names its connection, and the broker logs `[/local] Created subscription on topic T / sub`
  for the same connection and subscription: that gives T to every line with the pointer.
* `Broker notification of Closed consumer: <id>` (C++ and Java) names only the consumer id:
  the consumer is the one created last before it, in the same file, with that id.

A line whose consumer cannot be found keeps a null topic: nothing is guessed.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_audit.schemas import INFRA_EVENTS, conform


def _parsed_detail() -> Column:
    return F.from_json(F.col("detail"), "map<string,string>")


def _d(key: str) -> Column:
    return F.col("_d")[key]


def _pointer_topics(events: DataFrame) -> DataFrame:
    """(source_file, consumer_ref) → topic, from the broker's line for the same connection."""
    is_client_created = (F.col("source") == "client") & (
        F.col("event_type") == "client_consumer_created"
    )
    created = events.filter(is_client_created & _d("consumer_ref").isNotNull()).select(
        "source_file",
        _d("consumer_ref").alias("consumer_ref"),
        _d("subscription").alias("subscription"),
        F.regexp_extract(_d("connection"), r"^\[(\S+) -> ", 1).alias("local"),
        F.unix_micros("ts").alias("client_us"),
    )
    is_broker_created = (F.col("source") == "broker") & (F.col("event_type") == "consumer_created")
    broker = events.filter(is_broker_created & F.col("topic").isNotNull()).select(
        F.regexp_replace(_d("remote"), "^/", "").alias("local"),
        _d("subscription").alias("subscription"),
        F.col("topic").alias("found_topic"),
        F.unix_micros("ts").alias("broker_us"),
    )
    # the same ephemeral port may serve several runs: the nearest in time is the one
    distance = F.abs(F.col("client_us") - F.col("broker_us"))
    return (
        created.join(broker, on=["local", "subscription"], how="inner")
        .groupBy("source_file", "consumer_ref")
        .agg(F.min_by("found_topic", distance).alias("found_topic"))
    )


def _id_topics(events: DataFrame) -> DataFrame:
    """event_id → topic and subscription of the consumer created last before it (same id)."""
    is_created = (F.col("source") == "client") & (F.col("event_type") == "client_consumer_created")
    created = events.filter(is_created & F.col("topic").isNotNull()).select(
        "source_file",
        _d("consumer_id").alias("consumer_id"),
        F.col("topic").alias("created_topic"),
        _d("subscription").alias("created_subscription"),
        F.col("ts").alias("created_ts"),
    )
    orphans = events.filter(
        (F.col("source") == "client") & F.col("topic").isNull() & _d("consumer_id").isNotNull()
    ).select("event_id", "source_file", _d("consumer_id").alias("consumer_id"), "ts")
    before = F.col("created_ts") <= F.col("ts")
    return (
        orphans.join(created, on=["source_file", "consumer_id"], how="inner")
        .filter(before)
        .groupBy("event_id")
        .agg(
            F.max_by("created_topic", "created_ts").alias("id_topic"),
            F.max_by("created_subscription", "created_ts").alias("id_subscription"),
        )
    )


def with_consumer_topics(events: DataFrame) -> DataFrame:
    """Fill `topic` (and `subscription` in detail) of client consumer events that lack them.

    events: INFRA_EVENTS rows of every source (the broker's consumer lines are needed).
    """
    parsed = events.withColumn("_d", _parsed_detail())
    by_pointer = _join_pointer(parsed)
    with_pointer = by_pointer.withColumn("topic", F.coalesce("topic", "found_topic"))
    by_id = with_pointer.join(_id_topics(with_pointer), on="event_id", how="left")
    has_subscription = _d("subscription").isNotNull()
    add_subscription = F.map_concat(
        F.coalesce(F.col("_d"), F.create_map().cast("map<string,string>")),
        F.create_map(F.lit("subscription"), F.col("id_subscription")),
    )
    detail = F.when(
        ~has_subscription & F.col("id_subscription").isNotNull(), F.to_json(add_subscription)
    ).otherwise(F.col("detail"))
    attributed = by_id.withColumns({"topic": F.coalesce("topic", "id_topic"), "detail": detail})
    return conform(attributed, INFRA_EVENTS)


def _join_pointer(parsed: DataFrame) -> DataFrame:
    topics = _pointer_topics(parsed).select(
        F.col("source_file").alias("_pointer_file"),
        F.col("consumer_ref").alias("_pointer_ref"),
        "found_topic",
    )
    keys = (F.col("source_file") == F.col("_pointer_file")) & (
        _d("consumer_ref") == F.col("_pointer_ref")
    )
    return parsed.join(topics, on=keys, how="left")
