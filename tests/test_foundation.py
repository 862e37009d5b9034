"""Foundation: config, contract tables, Delta writes through the I/O module, CLI basics."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.config import ConfigError, load_config
from pulsar_audit.delta_io import Lakehouse, sql_string_literal
from pulsar_audit.schemas import RUN_STATE, TABLES, conform
from pulsar_audit.spark import DELTA_CONF, delta_jars
from pulsar_audit.spark_extension import EXTENSION_CLASS, extension_jar

REPO = Path(__file__).resolve().parent.parent


def test_spark_loads_delta_from_the_jar_cache(spark):
    jars = spark.conf.get("spark.jars")
    cached = [str(j) for j in delta_jars()]
    built = extension_jar()  # and pulsar-audit's own extension, once setup has built it
    assert jars.split(",") == cached + ([str(built)] if built else [])
    assert all("/.cache/jars/" in j for j in cached)
    extensions = spark.conf.get("spark.sql.extensions").split(",")
    assert extensions == [DELTA_CONF["spark.sql.extensions"]] + ([EXTENSION_CLASS] if built else [])


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
    from pipelines.live_state import state_part, state_rows
    from pulsar_audit.delta_log import create_local_table
    from pulsar_audit.schemas import LIVE_IN_FLIGHT, LIVE_STATE, PROVISIONAL

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
    older("live_state", LIVE_STATE, set(), {"live_runs"})  # (an artificial older contract)

    assert lakehouse.upgrade(["provisional", "live_state", "alerts"]) == [
        "provisional",
        "live_state",
    ]

    columns = {f.name: f for f in lakehouse._delta("provisional").toDF().schema.fields}
    assert {"causes", "causes_batch"} <= set(columns)
    assert lakehouse._delta("live_state").toDF().schema["live_runs"].nullable
    delivered_only = [("r1", "t", -1, "p1", 7, None, ["s1"])]
    in_flight = spark.createDataFrame(delivered_only, LIVE_IN_FLIGHT)
    lakehouse.overwrite("live_state", state_rows({"live_in_flight": in_flight}))
    stored = lakehouse.read("live_state")
    assert [r.seq for r in state_part(stored, "live_in_flight").collect()] == [7]
    assert state_part(stored, "live_runs").count() == 0
    assert lakehouse.upgrade(["provisional", "live_state"]) == []


def test_the_live_state_of_six_tables_is_carried_into_one(spark, lakehouse: Lakehouse):
    """A watch before session 33 kept its live state in a table per part, and an older one
    without live_streams' `seen_until` and `sent_upto`: the next watch carries it into
    silver.live_state once, the missing columns null; a later call carries nothing, even
    once live_state has been emptied."""
    from jobs.live_state import carry_over_state, read_state
    from pulsar_audit.schemas import LIVE_IN_FLIGHT, LIVE_RUNS, LIVE_STREAMS

    lakehouse.create_all()
    assert not carry_over_state(lakehouse)  # nothing of an older watch here
    at = datetime(2025, 3, 4, 10, 0, 0)
    sent = (at, 3, "p.jsonl", 3)
    older_streams = T.StructType(
        [f for f in LIVE_STREAMS.fields if f.name not in ("seen_until", "sent_upto")]
    )
    for table, schema, rows in (
        ("live_in_flight", LIVE_IN_FLIGHT, [("r1", "t", -1, "p1", 7, sent, [])]),
        ("live_streams", older_streams, [("r1", "t", -1, "p1", 1, at, at)]),
        ("live_runs", LIVE_RUNS, [("r1", at, 4)]),
    ):
        spark.createDataFrame(rows, schema).write.format("delta").save(lakehouse.location(table))

    assert carry_over_state(lakehouse)
    state = read_state(lakehouse)
    assert [(r.seq, r.sent_at.line_number) for r in state.in_flight.collect()] == [(7, 3)]
    [stream] = state.streams.collect()
    assert (stream.in_flight, stream.seen_until, stream.sent_upto) == (1, None, None)
    assert [(r.run_id, r.folded_batch) for r in state.runs.collect()] == [("r1", 4)]
    assert state.awaiting.count() == state.frontier.count() == state.consumers.count() == 0
    version = lakehouse.version("live_state")
    assert not carry_over_state(lakehouse)  # live_state holds the state now
    assert lakehouse.version("live_state") == version
    lakehouse.overwrite("live_state", read_state(lakehouse).as_table().limit(0))
    assert not carry_over_state(lakehouse)  # emptied since: not the old state again
    assert lakehouse.read("live_state").isEmpty()
    runs = spark.createDataFrame([("r2", at, 5)], LIVE_RUNS)
    with pytest.raises(ValueError, match="retired"):  # the old tables are only read now
        lakehouse.append("live_runs", runs)
    assert lakehouse.version("live_runs") == 0


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
