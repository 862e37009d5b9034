"""What analyze's steps side by side rest on: results in order, failures after every step ended,
the stage tag kept, one lock shared by a job's threads but not by two jobs, and the small-input
session only for small local inputs."""

from __future__ import annotations

import gzip
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pulsar_audit import locks
from pulsar_audit.config import load_config
from pulsar_audit.spark import (
    GENERATED_CODE_CONF,
    INGEST_CODEGEN_BYTES,
    SMALL_INPUT_BYTES,
    SMALL_INPUT_CONF,
    STAGE_PROPERTY,
    for_input,
    local_input_bytes,
    session_settings,
    side_by_side,
    spark_stage,
)


def test_no_step_and_one_step_run_in_the_caller():
    assert side_by_side() == []
    assert side_by_side(threading.current_thread) == [threading.current_thread()]


def test_results_in_order_and_steps_really_overlap():
    both_started = threading.Barrier(2, timeout=10)  # each waits for the other: not one by one

    def step(value: str):
        return lambda: (both_started.wait(), value)[1]

    assert side_by_side(step("a"), step("b")) == ["a", "b"]


def test_a_failure_is_raised_after_every_step_ended():
    ended: list[str] = []

    def fails():
        raise ValueError("first")

    def slow():
        threading.Event().wait(0.3)
        ended.append("slow")

    with pytest.raises(ValueError, match="first"):
        side_by_side(fails, slow)
    assert ended == ["slow"]


def test_steps_keep_the_callers_stage_tag(spark):
    context = spark.sparkContext

    def tag():
        return context.getLocalProperty(STAGE_PROPERTY)

    with spark_stage("pipeline"):
        assert side_by_side(tag, tag) == ["pipeline", "pipeline"]
    assert tag() is None


def test_one_jobs_threads_share_the_lock(tmp_path: Path):
    inside = threading.Barrier(2, timeout=10)

    def hold():
        with locks.exclusive(tmp_path, "ingest", wait_s=5):
            inside.wait()  # both threads inside at once, or the barrier times out

    side_by_side(hold, hold)
    assert not locks._HELD  # the last one out released it


def test_another_job_waits_for_the_lock_and_then_gives_up(tmp_path: Path):
    other = (
        "import sys; from pathlib import Path; from pulsar_audit import locks\n"
        "from pulsar_audit.errors import ConcurrentJobError\n"
        "try:\n"
        f"    with locks.exclusive(Path({str(tmp_path)!r}), 'ingest', wait_s=1): sys.exit(0)\n"
        "except ConcurrentJobError: sys.exit(3)\n"
    )
    with locks.exclusive(tmp_path, "ingest"):
        held = subprocess.run([sys.executable, "-c", other], check=False, timeout=60)
    assert held.returncode == 3
    free = subprocess.run([sys.executable, "-c", other], check=False, timeout=60)
    assert free.returncode == 0


def test_input_size_counts_gzip_and_parquet_as_their_text(tmp_path: Path):
    (tmp_path / "a.jsonl").write_bytes(b"x" * 100)
    # a gzip file's trailer records its text's size; below the file's own (a tiny file here)
    # it is no measure, and the file counts as 8 times its size
    with gzip.open(tmp_path / "b.jsonl.gz", "wb") as f:
        f.write(b"{}\n")
    gz = (tmp_path / "b.jsonl.gz").stat().st_size
    with gzip.open(tmp_path / "d.jsonl.gz", "wb") as f:
        f.write(b'{"seq": 1}\n' * 5000)
    (tmp_path / "c.parquet").write_bytes(b"p" * 10)
    assert local_input_bytes(str(tmp_path / "d.jsonl.gz")) == 11 * 5000
    assert local_input_bytes(str(tmp_path)) == 100 + 8 * gz + 16 * 10 + 11 * 5000
    assert local_input_bytes(str(tmp_path / "a.jsonl")) == 100
    assert local_input_bytes(f"file://{tmp_path}/a.jsonl") == 100
    assert local_input_bytes("s3a://bucket/traces") is None
    assert local_input_bytes(str(tmp_path / "missing")) is None


def test_a_gzip_file_whose_text_may_pass_4_gib_counts_at_least_its_estimate(tmp_path: Path):
    # the trailer's record is the text's size modulo 4 GiB: from a file of 600 MiB (sparse
    # here; only its last 4 bytes are read) a record of 1 GiB may be 5 or 9 GiB of text
    def sparse(size: int, recorded: int) -> str:
        big = tmp_path / f"big-{size}.jsonl.gz"
        with big.open("wb") as f:
            f.truncate(size - 4)
            f.seek(size - 4)
            f.write(recorded.to_bytes(4, "little"))
        return str(big)

    assert local_input_bytes(sparse(600 << 20, 1 << 30)) == 8 * (600 << 20)
    # just below 4 GiB of estimate the record is still taken
    assert local_input_bytes(sparse((512 << 20) - 1, 3 << 30)) == 3 << 30


def test_small_local_inputs_get_the_small_input_session(tmp_path: Path):
    config = load_config("local", lakehouse=str(tmp_path))
    small = for_input(config, 1000)
    assert small.spark.shuffle_partitions == 1
    assert small.spark.conf == {**SMALL_INPUT_CONF, **config.spark.conf}
    assert small.pipeline == config.pipeline
    assert small.spark.ingest_conf == {}
    for unchanged in (SMALL_INPUT_BYTES + 1, None):
        assert for_input(config, unchanged) is config


def test_a_small_input_of_a_few_thousand_records_is_ingested_with_generated_code(tmp_path: Path):
    config = load_config("local", lakehouse=str(tmp_path))
    assert for_input(config, INGEST_CODEGEN_BYTES - 1).spark.ingest_conf == {}
    assert for_input(config, INGEST_CODEGEN_BYTES).spark.ingest_conf == GENERATED_CODE_CONF
    # the rest of the job keeps the small-input session's interpreted evaluation
    conf = for_input(config, INGEST_CODEGEN_BYTES).spark.conf
    assert conf["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    # an env that sets code generation itself keeps it for the ingest too
    own = replace(
        config, spark=replace(config.spark, conf={"spark.sql.codegen.factoryMode": "NO_CODEGEN"})
    )
    assert for_input(own, INGEST_CODEGEN_BYTES).spark.ingest_conf == {}


def test_a_cluster_and_an_envs_own_settings_are_left_alone(tmp_path: Path):
    config = load_config("standalone", lakehouse=str(tmp_path))
    assert for_input(config, 1000) is config
    local = load_config("local", lakehouse=str(tmp_path))
    own = replace(local, spark=replace(local.spark, conf={"spark.sql.adaptive.enabled": "true"}))
    assert for_input(own, 1000).spark.conf["spark.sql.adaptive.enabled"] == "true"


def test_settings_set_before_one_the_session_refuses_are_put_back(spark):
    """A static setting (fixed when the session started) cannot be set: the settings set
    before it are restored, none is left on the session."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    settings = {key: "7", "spark.sql.ui.retainedExecutions": "5"}
    with (
        pytest.raises(Exception, match="spark.sql.ui.retainedExecutions"),
        session_settings(spark, settings),
    ):
        raise AssertionError("the body must not run")
    assert spark.conf.get(key) == before != "7"
