"""pulsar_audit/packed.py: frames of different columns packed into one checkpoint come back
each with its own columns and rows, an empty one empty, a null a null; the small ones in one
collect."""

from __future__ import annotations

from pyspark.sql import types as T

from pulsar_audit.local_frames import local_frame
from pulsar_audit.packed import collected, packed, unpacked


def _same(df, like) -> None:  # noqa: ANN001
    """The same columns, types and rows (in any order)."""
    assert df.schema.simpleString() == like.schema.simpleString()
    rows = sorted(map(tuple, df.collect()), key=repr)
    assert rows == sorted(map(tuple, like.collect()), key=repr)


RUNS = T.StructType(
    [T.StructField("run_id", T.StringType(), False), T.StructField("now", T.LongType(), True)]
)
SEQS = T.StructType(
    [
        T.StructField("seq", T.LongType(), False),
        T.StructField("to", T.ArrayType(T.StringType()), True),
        T.StructField("run_id", T.LongType(), True),  # same name, another type than RUNS'
    ]
)


def test_each_frame_comes_back_alone_empty_and_null_included(spark) -> None:
    runs = local_frame(spark, [("r1", 5), ("r2", None)], RUNS)
    seqs = local_frame(spark, [(1, ["s1"], 7), (2, None, None), (3, [], 9)], SEQS)
    nothing = local_frame(spark, [], RUNS)

    pack = packed({"runs": runs, "seqs": seqs, "nothing": nothing})

    _same(unpacked(pack, "runs"), runs)
    _same(unpacked(pack, "seqs"), seqs)
    assert unpacked(pack, "nothing").columns == ["run_id", "now"]
    assert unpacked(pack, "nothing").count() == 0
    assert unpacked(pack, "seqs").schema["run_id"].dataType == T.LongType()


def test_the_small_frames_come_in_one_collect_with_their_fields(spark) -> None:
    runs = local_frame(spark, [("r1", 5), ("r2", None)], RUNS)
    seqs = local_frame(spark, [(1, ["s1"], 7)], SEQS)
    pack = packed({"runs": runs, "seqs": seqs, "ended": local_frame(spark, [], RUNS)})

    small = collected(pack, ["runs", "ended"])

    assert sorted((r["run_id"], r["now"]) for r in small["runs"]) == [("r1", 5), ("r2", None)]
    assert small["ended"] == []
    assert "seqs" not in small
    assert collected(pack, []) == {}
