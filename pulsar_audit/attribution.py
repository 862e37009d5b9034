"""Trace format v1's attribution rule, which the checks and silver both apply: a receive names
its producer, or its topic has exactly one producer, which it then belongs to."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def sole_producers(producer_events: DataFrame) -> DataFrame:
    """(run_id, topic, sole_producer) for each topic that has exactly one producer."""
    return (
        producer_events.groupBy("run_id", "topic")
        .agg(
            F.count_distinct("client").alias("producers"),
            F.min("client").alias("sole_producer"),
        )
        .filter(F.col("producers") == 1)
        .select("run_id", "topic", "sole_producer")
    )


def with_sole_producer(receives: DataFrame, producer_events: DataFrame) -> DataFrame:
    """`receives` with a missing `producer` filled in where the topic has one producer; it
    stays null where it cannot be resolved (such rows are counted, never dropped)."""
    return (
        receives.join(F.broadcast(sole_producers(producer_events)), ["run_id", "topic"], "left")
        .withColumn("producer", F.coalesce("producer", "sole_producer"))
        .drop("sole_producer")
    )
