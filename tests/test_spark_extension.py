"""pulsar-audit's Spark extension (pulsar_audit/spark_extension.py; jvm/src): in a session that
shuffles into one partition without adaptive execution (the tests' own), each shuffle Spark
places into that partition is a narrow coalesce; the rows are the ones Spark's shuffles give."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.spark import session_settings
from pulsar_audit.spark_extension import (
    EXTENSION_CLASS,
    EXTENSION_ENV,
    LOCAL_FS_CONF,
    extension_jar,
    extension_jar_path,
)

ONE = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}


@pytest.fixture(autouse=True)
def loaded(spark: SparkSession) -> None:
    """The tests' session loaded the extension (setup built it), or says why it could not."""
    if EXTENSION_CLASS in spark.conf.get("spark.sql.extensions").split(","):
        return
    if os.environ.get(EXTENSION_ENV, "").lower() == "off":
        pytest.skip(f"{EXTENSION_ENV}=off: sessions run without the extension")
    if shutil.which("javac") is None:
        pytest.skip("no JDK compiler here: setup builds no extension, sessions run without")
    pytest.fail(f"the tests' session did not load {EXTENSION_CLASS} ({extension_jar_path()})")


def plan_of(df: DataFrame) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def shuffles(plan: str) -> bool:
    """Whether the plan shuffles (a broadcast is no shuffle)."""
    return re.search(r"(?<!Broadcast)Exchange ", plan) is not None


def joined(spark: SparkSession) -> DataFrame:
    """Aggregates, a full and a left join, a window, a union, a global order, over inputs of
    several partitions (a coalesce reads them all) and an empty one."""
    sends = spark.range(0, 40, 1, 4).select(
        (F.col("id") % 5).alias("producer"), F.col("id").alias("seq")
    )
    acks = spark.range(0, 40, 3, 3).select(
        (F.col("id") % 7).alias("producer"), F.col("id").alias("acked")
    )
    nothing = spark.range(0, 0, 1, 2).select(F.col("id").alias("producer"), F.lit(1).alias("x"))
    per = sends.groupBy("producer").agg(F.max("seq").alias("upto"), F.count("*").alias("sent"))
    got = acks.groupBy("producer").agg(F.sum("acked").alias("acked"))
    both = per.join(got, "producer", "full").join(nothing, "producer", "left")
    ranked = both.withColumn(
        "rank", F.row_number().over(W.partitionBy(F.col("producer") % 2).orderBy("producer"))
    )
    more = (
        sends.select("producer")
        .distinct()
        .select(
            "producer", *[F.lit(None).cast(t).alias(c) for c, t in ranked.dtypes if c != "producer"]
        )
    )
    return ranked.unionByName(more).orderBy("producer", F.col("rank").asc_nulls_last())


def test_a_one_partition_plan_has_no_shuffle(spark: SparkSession) -> None:
    with session_settings(spark, ONE):
        plan = plan_of(joined(spark))
        assert not shuffles(plan)
        assert "Coalesce 1" in plan
        # a global aggregate too (a shuffle into a single partition)
        assert not shuffles(plan_of(spark.range(0, 10, 1, 3).agg(F.sum("id"))))


def test_the_rows_are_those_of_spark_s_shuffles(spark: SparkSession) -> None:
    with session_settings(spark, ONE):
        narrowed = joined(spark).collect()
        total = spark.range(0, 10, 1, 3).agg(F.sum("id").alias("s")).first()["s"]
    with session_settings(spark, {**ONE, "spark.sql.shuffle.partitions": "3"}):
        shuffled = joined(spark)
        assert shuffles(plan_of(shuffled))
        assert narrowed == shuffled.collect()  # ordered: the same rows in the same order
    assert len(narrowed) == 12  # the 7 producers acked (5 of them sending), then the 5 sending
    assert total == 45


def test_more_partitions_or_adaptive_execution_keep_their_shuffles(spark: SparkSession) -> None:
    with session_settings(spark, {**ONE, "spark.sql.shuffle.partitions": "2"}):
        assert "Exchange hashpartitioning" in plan_of(joined(spark))
    with session_settings(spark, {**ONE, "spark.sql.adaptive.enabled": "true"}):
        adaptive = joined(spark)
        adaptive.collect()
        assert "Final Plan" in plan_of(adaptive)  # as adaptive execution ran it
        assert shuffles(plan_of(adaptive))


def test_an_input_of_no_partition_is_one_empty_partition(spark: SparkSession) -> None:
    """A scan of an empty table has no partition at all: coalesced, the join and the
    aggregates over it still give one row per producer, as Spark's shuffles do."""
    schema = "producer long, acked long"
    none = spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
    assert none.rdd.getNumPartitions() == 0

    def per_producer() -> list:
        sends = spark.range(0, 6, 1, 2).select((F.col("id") % 3).alias("producer"))
        acked = none.groupBy("producer").agg(F.max("acked").alias("acked"))
        per = sends.groupBy("producer").agg(F.count("*").alias("sent"))
        found = per.join(acked, "producer", "left").orderBy("producer")
        return found.collect(), plan_of(found), none.agg(F.count("*")).first()[0]

    no_broadcast = {**ONE, "spark.sql.autoBroadcastJoinThreshold": "-1"}
    with session_settings(spark, no_broadcast):
        narrowed, plan, empty = per_producer()
        assert not shuffles(plan)
    with session_settings(spark, {**no_broadcast, "spark.sql.shuffle.partitions": "3"}):
        shuffled, _, _ = per_producer()
    assert narrowed == shuffled
    assert [(r["producer"], r["sent"], r["acked"]) for r in narrowed] == [
        (0, 2, None),
        (1, 2, None),
        (2, 2, None),
    ]
    assert empty == 0


def test_turned_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXTENSION_ENV, "off")
    assert extension_jar() is None
    monkeypatch.setenv(EXTENSION_ENV, "on")
    assert extension_jar() == extension_jar_path()


def test_local_files_are_the_jar_s_file_system(spark: SparkSession, tmp_path: Path) -> None:
    """Local files go through the jar's file system (no `chmod` or `readlink` process per file
    created or renamed), with the outcomes of Hadoop's: the permission asked (a sticky bit
    too, by Hadoop's own code), a symbolic link seen as one, a missing path not found, a
    rename over an existing file as a Delta commit does it."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop = jvm.org.apache.hadoop.fs
    local = hadoop.FileSystem.getLocal(conf)
    raw = local.getRaw()
    context = hadoop.FileContext.getLocalFSFileContext(conf)
    assert local.getClass().getName() == LOCAL_FS_CONF["fs.file.impl"]
    assert raw.getClass().getName() == "io.pulsaraudit.spark.ShellFreeRawLocalFileSystem"
    assert (
        context.getDefaultFileSystem().getClass().getName()
        == (LOCAL_FS_CONF["fs.AbstractFileSystem.file.impl"])
    )

    def path(p: Path) -> object:
        return hadoop.Path(str(p))

    file = tmp_path / "f.txt"
    file.write_text("x")
    local.setPermission(path(file), hadoop.permission.FsPermission.valueOf("-rw-r-----"))
    assert stat.S_IMODE(file.stat().st_mode) == 0o640
    shared = tmp_path / "shared"
    shared.mkdir()
    local.setPermission(path(shared), hadoop.permission.FsPermission.valueOf("drwxrwxrwt"))
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777

    link = tmp_path / "link"
    link.symlink_to(file)
    linked = raw.getFileLinkStatus(path(link))
    assert linked.isSymlink() and linked.getSymlink().toString().endswith("f.txt")
    plain = raw.getFileLinkStatus(path(file))
    assert not plain.isSymlink() and plain.getLen() == 1
    with pytest.raises(Exception, match="FileNotFoundException"):
        raw.getFileLinkStatus(path(tmp_path / "missing"))

    target = tmp_path / "target.txt"
    target.write_text("old")
    overwrite = jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE
    renames = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    renames[0] = overwrite
    context.rename(path(file), path(target), renames)
    assert target.read_text() == "x" and not file.exists()

    table = tmp_path / "table"
    spark.range(3).write.format("delta").save(str(table))
    spark.range(2).write.format("delta").mode("append").save(str(table))
    assert spark.read.format("delta").load(str(table)).count() == 5
    commit = table / "_delta_log" / "00000000000000000001.json"
    assert stat.S_IMODE(commit.stat().st_mode) == 0o644  # as Hadoop's chmod leaves it


def test_a_jvm_without_the_class_keeps_its_file_system(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session whose JVM cannot load the named class (one started without the jar) is left
    with the file system it has: no setting naming a class it cannot load."""
    import pulsar_audit.spark as spark_module

    missing = {key: "io.pulsaraudit.spark.NoSuchFileSystem" for key in LOCAL_FS_CONF}
    monkeypatch.setattr(spark_module, "LOCAL_FS_CONF", missing)
    spark_module.use_local_fs(spark)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    assert {key: conf.get(key) for key in LOCAL_FS_CONF} == LOCAL_FS_CONF
    local = spark.sparkContext._jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert local.getClass().getName() == LOCAL_FS_CONF["fs.file.impl"]
