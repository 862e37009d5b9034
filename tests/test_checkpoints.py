"""A checkpoint kept from one computation into the next (`without_estimate`): the rows it
holds, without the size estimate of the plan that computed them."""

from __future__ import annotations

import itertools

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pulsar_audit.spark import checkpointed, release, without_estimate

DEFAULT = len(str(2**63 - 1))  # the digits of Spark's estimate for a leaf it knows nothing of


def _digits(df: DataFrame) -> int:
    return len(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def _rounds(spark: SparkSession, keep) -> tuple[list[int], list]:  # noqa: ANN001
    """Five rounds of a frame rebuilt from itself by a self-join and kept again (as a watch's live
    state is, micro-batch after micro-batch): the estimate's digits after each, the rows."""
    base = checkpointed(spark.range(50).withColumn("k", F.col("id") % 7))
    kept, digits = base, []
    for _ in range(5):
        other = kept.select("id", F.col("k").alias("other"))  # the state's parts joined
        joined = kept.join(other, "id").select("id", (F.col("k") + 1).alias("k"))
        previous, kept = kept, keep(checkpointed(joined))
        if previous is not base:
            release(previous)
        digits.append(_digits(kept))
    rows = sorted(map(tuple, kept.collect()))
    release(kept)
    release(base)
    return digits, rows


def test_a_kept_frame_carries_no_estimate_of_its_making(spark: SparkSession) -> None:
    compounding, rows = _rounds(spark, lambda df: df)
    fresh, same_rows = _rounds(spark, without_estimate)
    # a checkpoint carries the estimate of the join that made it: a product of products
    # doubling, round after round (6, 11, 21, 40, 80 digits here)
    assert all(b > 1.8 * a for a, b in itertools.pairwise(compounding))
    assert fresh == [DEFAULT] * 5
    assert same_rows == rows and rows[:2] == [(0, 5), (1, 6)]


def test_a_frame_that_is_no_checkpoint_is_left_as_it_is(spark: SparkSession) -> None:
    df = spark.range(3)
    assert without_estimate(df) is df


def test_released_like_the_checkpoint_it_holds(spark: SparkSession) -> None:
    kept = without_estimate(checkpointed(spark.range(10)))
    rdd = kept._jdf.queryExecution().analyzed().rdd()
    assert rdd.getStorageLevel().useMemory()
    release(kept)
    assert not rdd.getStorageLevel().useMemory() and not rdd.getStorageLevel().useDisk()
