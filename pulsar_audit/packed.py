"""Several frames computed by one Spark job into one checkpoint, and read back each alone.

A job that derives many small frames from the same inputs (`watch`'s live state's parts, the
outages a micro-batch closed, its findings) pays a Spark job, and the planning of the shared
inputs, per frame it checkpoints or collects. Packed, each frame is a struct column of its
own beside the name of the frame a row belongs to: one checkpoint computes them all (the
optimizer reuses what their plans share), each is unpacked with a filter on that name, and
the small ones come to the driver in one collect.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from pulsar_audit.schemas import PART  # the name of the frame a packed row belongs to
from pulsar_audit.spark import checkpointed


def pack(frames: dict[str, DataFrame]) -> DataFrame:
    """`frames` as one frame: a PART column and one struct column per frame (named as the
    frame, null in the other frames' rows). Not empty: at least one frame."""
    rows = [
        df.select(F.lit(name).alias(PART), F.struct(*df.columns).alias(name))
        for name, df in frames.items()
    ]
    union = rows[0]
    for more in rows[1:]:
        union = union.unionByName(more, allowMissingColumns=True)
    return union


def packed(frames: dict[str, DataFrame]) -> DataFrame:
    """`pack(frames)` computed once, into a checkpoint of as many partitions as a shuffle's.

    The union has a partition per partition of every frame (a dozen for `watch`'s fold, on a
    small input's one shuffle partition each), and each task of it deserializes the whole
    union's plan: coalesced, a small pack is one task, and so are the jobs that read it."""
    union = pack(frames)
    partitions = int(union.sparkSession.conf.get("spark.sql.shuffle.partitions") or "1")
    return checkpointed(union.coalesce(max(partitions, 1)))


def unpacked(pack: DataFrame, name: str) -> DataFrame:
    """The frame `name` of `pack`, with its own columns."""
    return pack.filter(F.col(PART) == name).select(f"{name}.*")


def collected(pack: DataFrame, names: list[str]) -> dict[str, list[Row]]:
    """The rows of the frames `names` of `pack`, in one collect (small frames only)."""
    found: dict[str, list[Row]] = {name: [] for name in names}
    if names:
        for row in pack.filter(F.col(PART).isin(names)).select(PART, *names).collect():
            found[row[PART]].append(row[row[PART]])
    return found
