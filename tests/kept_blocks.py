"""What a Spark session keeps cached, for tests that a job frees what it kept."""

from __future__ import annotations

from pyspark.sql import SparkSession


def kept_blocks(spark: SparkSession) -> set[int]:
    """The ids of the RDDs the session keeps blocks of (persisted or checkpointed), but Delta's
    own cache of each table version's state (Delta frees those with the snapshot).

    Spark holds these RDDs weakly: one the JVM has collected is gone from the answer (and its
    blocks freed), so a leak shows only while the JVM still holds it, as right after a job."""
    kept = spark.sparkContext._jsc.getPersistentRDDs()  # noqa: SLF001 - no Python API for it
    return {k for k in kept.keySet() if not str(kept.get(k).name()).startswith("Delta Table")}
