"""Foundation: config, contract tables, Delta writes through the I/O module, CLI basics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.config import ConfigError, load_config
from pulsar_audit.delta_io import Lakehouse, sql_string_literal
from pulsar_audit.schemas import RUN_STATE, TABLES, conform
from pulsar_audit.spark import delta_jars

REPO = Path(__file__).resolve().parent.parent


def test_spark_loads_delta_from_the_jar_cache(spark):
    jars = spark.conf.get("spark.jars")
    cached = [str(j) for j in delta_jars()]
    assert jars.split(",") == cached
    assert all("/.cache/jars/" in j for j in cached)


def test_a_thousand_level_lineage_runs_on_the_local_drivers_stacks(spark):
    """A stage's task whose RDD lineage is a thousand levels deep is serialized and run: the
    local driver's threads have 16 MB stacks (on the JVM's default 1 MB, 300 levels of this
    lineage overflow: StackOverflowError)."""
    rdd = spark.sparkContext.parallelize([1, 2, 3], 1)
    for _ in range(1000):
        rdd = rdd.coalesce(1)  # one more level each, one partition, one task
    assert rdd.count() == 3


def test_init_creates_every_contract_table_once(lakehouse: Lakehouse):
    first = lakehouse.create_all()
    assert {r["table"] for r in first} == set(TABLES)
    assert all(r["created"] for r in first)
    versions = {name: lakehouse.version(name) for name in TABLES}
    second = lakehouse.create_all()
    assert not any(r["created"] for r in second)
    assert {name: lakehouse.version(name) for name in TABLES} == versions
    for name, spec in TABLES.items():
        assert lakehouse.read(name).schema == spec.schema, name


def test_a_new_table_keeps_file_statistics_only_of_its_run_and_key_columns(
    spark, lakehouse: Lakehouse
):
    from datetime import datetime

    lakehouse.create_all()
    for name, spec in TABLES.items():
        detail = spark.sql("DESCRIBE DETAIL delta.`" + lakehouse.location(name) + "`").first()
        assert detail.properties == spec.properties(), name
    assert TABLES["message_history"].stats_columns() == (
        "run_id", "topic", "partition", "producer", "seq"
    )  # fmt: skip
    assert TABLES["broker_log"].stats_columns() == ("source_file", "line_number")

    at = datetime(2025, 3, 4, 10, 15, 30)
    lakehouse.append("run_state", _state(spark, [("r1", "a", at), ("r2", "b", at)]))

    log = Path(lakehouse.location("run_state")) / "_delta_log"
    adds = [
        json.loads(line)["add"]
        for commit in sorted(log.glob("*.json"))
        for line in commit.read_text().splitlines()
        if '"add"' in line
    ]
    stats = json.loads(adds[-1]["stats"])
    assert stats["numRecords"] == 2
    assert stats["minValues"] == {"run_id": "r1"} and stats["maxValues"] == {"run_id": "r2"}


def _state(spark, rows):
    return spark.createDataFrame(rows, RUN_STATE)


def test_merge_same_batch_twice_keeps_row_count(spark, lakehouse: Lakehouse):
    from datetime import datetime

    at = datetime(2025, 3, 4, 10, 15, 30)
    batch = _state(spark, [("r1", "a", at), ("r2", "b", at)])
    lakehouse.merge("run_state", batch)
    lakehouse.merge("run_state", batch)
    assert lakehouse.read("run_state").count() == 2
    lakehouse.merge("run_state", _state(spark, [("r1", "changed", at)]))
    got = {r.run_id: r.input_fingerprint for r in lakehouse.read("run_state").collect()}
    assert got == {"r1": "changed", "r2": "b"}


def test_time_travel_reads_an_earlier_version(spark, lakehouse: Lakehouse):
    from datetime import datetime

    at = datetime(2025, 3, 4, 10, 15, 30)
    lakehouse.append("run_state", _state(spark, [("r1", "v1", at)]))
    before = lakehouse.version("run_state")
    lakehouse.append("run_state", _state(spark, [("r2", "v2", at)]))
    assert lakehouse.read("run_state").count() == 2
    old = lakehouse.read("run_state", version=before)
    assert [r.run_id for r in old.collect()] == ["r1"]


def test_replace_runs_replaces_only_those_runs(spark, lakehouse: Lakehouse):
    from datetime import datetime

    at = datetime(2025, 3, 4, 10, 15, 30)
    hostile = "it's \\ odd"
    lakehouse.append("run_state", _state(spark, [("keep", "k", at), (hostile, "old", at)]))
    lakehouse.replace_runs("run_state", _state(spark, [(hostile, "new", at)]), [hostile])
    lakehouse.replace_runs("run_state", _state(spark, [(hostile, "new", at)]), [hostile])
    got = sorted((r.run_id, r.input_fingerprint) for r in lakehouse.read("run_state").collect())
    assert got == [(hostile, "new"), ("keep", "k")]


def test_a_table_of_an_older_contract_is_upgraded_in_place(spark, lakehouse: Lakehouse):
    """A watch's tables written before their contract grew: the columns added since are
    added, a NOT NULL the contract dropped is dropped; a MERGE naming the new column and a
    null in the loosened one then work; a second upgrade changes nothing."""
    from pulsar_audit.delta_log import create_local_table
    from pulsar_audit.schemas import LIVE_IN_FLIGHT, PROVISIONAL

    def older(table: str, schema: T.StructType, drop: set[str], strict: set[str]) -> None:
        fields = [
            T.StructField(f.name, f.dataType, f.nullable and f.name not in strict)
            for f in schema.fields
            if f.name not in drop
        ]
        # as `Lakehouse.create` writes a table's first commit (NOT NULL kept in its schema)
        path = Path(lakehouse.location(table))
        create_local_table(path, T.StructType(fields), lakehouse.spec(table).properties())

    older("provisional", PROVISIONAL, {"causes", "causes_batch"}, set())
    older("live_in_flight", LIVE_IN_FLIGHT, set(), {"sent_at"})

    assert lakehouse.upgrade(["provisional", "live_in_flight", "alerts"]) == [
        "provisional",
        "live_in_flight",
    ]

    columns = {f.name: f for f in lakehouse._delta("provisional").toDF().schema.fields}
    assert {"causes", "causes_batch"} <= set(columns)
    in_flight = lakehouse._delta("live_in_flight").toDF().schema
    assert in_flight["sent_at"].nullable
    delivered_only = [("r1", "t", -1, "p1", 7, None, ["s1"])]
    lakehouse.overwrite("live_in_flight", spark.createDataFrame(delivered_only, LIVE_IN_FLIGHT))
    assert [r.seq for r in lakehouse.read("live_in_flight").collect()] == [7]
    assert lakehouse.upgrade(["provisional", "live_in_flight"]) == []


def test_sql_string_literal_escapes_quotes_and_backslashes(spark):
    value = "a'b\\c"
    assert spark.sql(f"SELECT {sql_string_literal(value)} AS v").first().v == value


def test_conform_names_missing_columns(spark):
    df = spark.createDataFrame([("r1",)], "run_id string")
    with pytest.raises(ValueError, match=r"missing columns \['input_fingerprint', 'computed_at'\]"):
        conform(df, RUN_STATE)
    full = df.select(
        F.lit(1).alias("junk"),
        "run_id",
        F.lit("x").alias("input_fingerprint"),
        F.lit("2025-03-04 10:15:30").alias("computed_at"),
    )
    got = conform(full, RUN_STATE).schema
    assert [(f.name, f.dataType) for f in got] == [(f.name, f.dataType) for f in RUN_STATE]
    assert got["computed_at"].dataType == T.TimestampType()


def test_config_rejects_unknown_and_missing_keys(tmp_path: Path):
    (tmp_path / "bad.yaml").write_text((REPO / "conf/local.yaml").read_text() + "colour: blue\n")
    with pytest.raises(ConfigError, match=r"unknown keys \['colour'\]"):
        load_config("bad", conf_dir=tmp_path)
    text = (REPO / "conf/local.yaml").read_text().replace("  outage_threshold_ms: 100\n", "")
    (tmp_path / "short.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"pipeline: missing keys \['outage_threshold_ms'\]"):
        load_config("short", conf_dir=tmp_path)
    with pytest.raises(ConfigError, match="no config for env 'nope'"):
        load_config("nope", conf_dir=tmp_path)


def test_databricks_config_names_catalog_tables(spark):
    config = load_config("databricks")
    assert config.storage == "catalog"
    lakehouse = Lakehouse(spark, config)
    assert lakehouse.location("producer_events") == "main.pulsar_audit_bronze.producer_events"
    assert lakehouse.location("anomalies") == "main.pulsar_audit_gold.anomalies"


def _cli(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "pulsar-audit"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600)


def test_cli_help_and_usage_errors():
    top = _cli("--help")
    assert top.returncode == 0 and "init" in top.stdout
    assert _cli("init", "--help").returncode == 0
    assert _cli("no-such-command").returncode == 2
    bad = _cli("init", "--env", "nope")
    assert bad.returncode == 2 and "no config for env 'nope'" in bad.stderr


@pytest.mark.slow
def test_cli_init_twice_creates_same_tables(tmp_path: Path):
    import json

    first = _cli("init", "--env", "local", "--lakehouse", str(tmp_path), "--json")
    assert first.returncode == 0, first.stderr
    created = json.loads(first.stdout)["tables"]
    assert sorted(t["table"] for t in created if t["created"]) == sorted(TABLES)
    second = json.loads(_cli("init", "--lakehouse", str(tmp_path), "--json").stdout)["tables"]
    assert [t["created"] for t in second] == [False] * len(TABLES)
    assert (tmp_path / "gold" / "run_summary" / "_delta_log").is_dir()
