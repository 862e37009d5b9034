"""local_frame: small frames from Python rows, read by the JVM without a Python worker."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

from pulsar_audit.local_frames import local_frame, local_rows
from pulsar_audit.schemas import ALERTS, RUN_FILES

NESTED = T.StructType(
    [
        T.StructField("run_id", T.StringType(), False),
        T.StructField("at", T.TimestampType()),
        T.StructField("extra", T.MapType(T.StringType(), T.StringType())),
        T.StructField("seqs", T.ArrayType(T.LongType())),
        T.StructField("where", T.StructType([T.StructField("ledger", T.LongType())])),
    ]
)


def _plan(frame) -> str:  # noqa: ANN001 - DataFrame
    return frame._jdf.queryExecution().optimizedPlan().toString()


def test_no_rows_give_an_empty_frame_of_the_schema(spark):
    frame = local_frame(spark, [], RUN_FILES)
    assert frame.schema == RUN_FILES
    assert frame.count() == 0


def test_a_local_frame_counts_its_rows_without_a_job(spark):
    frame = local_frame(
        spark, [("r1", "/a", 1), ("r2", "/b", 2)], "run_id string, f string, n long"
    )
    assert local_rows(frame) == 2 and local_rows(frame.select("n", "run_id")) == 2
    assert local_rows(local_frame(spark, [], RUN_FILES)) == 0
    # anything computed is not known without a job
    assert local_rows(frame.filter("n > 1")) is None
    assert local_rows(frame.select((frame.n + 1).alias("n"))) is None
    assert local_rows(spark.range(3)) is None


def test_nulls_nested_values_and_a_ddl_schema(spark):
    rows = [
        ("r1", dt.datetime(2026, 1, 1, 10, 0, 0, 123000), {"k": "v"}, [1, 2], Row(ledger=7)),
        {"run_id": "r2", "at": None, "extra": None, "seqs": None, "where": None},
    ]
    frame = local_frame(spark, rows, NESTED)
    assert frame.schema == NESTED
    # the pickled path, as the reference
    expected = spark.createDataFrame([rows[0], ("r2", None, None, None, None)], NESTED)
    assert frame.collect() == expected.collect()
    ddl = local_frame(spark, [("a", 1)], "stage string, n int")
    assert ddl.collect() == [Row(stage="a", n=1)]


def test_the_rows_reach_the_jvm_as_a_local_relation(spark):
    frame = local_frame(spark, [("a", 1)], "stage string, n int")
    assert _plan(frame).startswith("LocalRelation")


def test_a_naive_datetime_is_utc(spark):
    frame = local_frame(spark, [(dt.datetime(2026, 1, 1, 10, 0),)], "at timestamp")
    assert frame.selectExpr("unix_timestamp(at) AS s").first()["s"] == 1767261600


def test_a_null_in_a_non_nullable_field_is_refused(spark):
    with pytest.raises(ValueError, match="'run_id' is not nullable"):
        local_frame(spark, [(None, None, None, None, None)], NESTED)


def test_an_array_of_structs_from_dicts(spark):
    schema = T.StructType([ALERTS["dedup_key"], ALERTS["deliveries"]])
    element = schema["deliveries"].dataType.elementType
    delivery = {f.name: None for f in element.fields} | {"sink": "webhook"}
    frame = local_frame(spark, [("k1", [delivery])], schema)
    assert frame.first()["deliveries"][0]["sink"] == "webhook"


def test_a_collected_row_written_back_is_the_same_instant_on_a_process_off_utc(spark):
    """`collect()` gives naive datetimes in the process's zone, `local_frame` takes them as
    UTC: off UTC a row read back and written again moved by the offset; once the process is
    put on UTC (`get_spark` does it) it does not."""
    import os
    import time

    from pulsar_audit.spark import utc_process_clock

    schema = T.StructType([T.StructField("at", T.TimestampType())])
    at = dt.datetime(2026, 1, 1, 12, 0, 0)
    before = os.environ.get("TZ")
    try:
        os.environ["TZ"] = "Asia/Kolkata"  # +05:30, no daylight saving
        time.tzset()
        [[moved]] = local_frame(
            spark, local_frame(spark, [(at,)], schema).collect(), schema
        ).collect()
        assert moved != at  # what a process off UTC did
        assert utc_process_clock() is True
        [[kept]] = local_frame(
            spark, local_frame(spark, [(at,)], schema).collect(), schema
        ).collect()
        assert kept == at
        assert utc_process_clock() is False  # already on UTC
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()
