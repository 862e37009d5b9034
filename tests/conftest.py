"""Shared fixtures: one local Spark session with Delta from the jar cache, tables under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_audit.config import Config, load_config
from pulsar_audit.delta_io import Lakehouse

TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
    "spark.driver.memory": "2g",
    # Tests run many tiny multi-stage plans: adaptive execution and code generation only add
    # overhead there (about half of each test's time).
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    from pulsar_audit.spark import get_spark

    warehouse = tmp_path_factory.mktemp("spark")
    config = load_config("local", lakehouse=str(warehouse))
    session = get_spark(config, extra_conf={**TEST_SPARK_CONF, "spark.master": "local[2]"})
    yield session
    session.stop()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return load_config("local", lakehouse=str(tmp_path / "lakehouse"))


@pytest.fixture
def lakehouse(spark, config: Config) -> Lakehouse:
    return Lakehouse(spark, config)


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    """A real Pulsar standalone (ZooKeeper metadata) on free loopback ports, for the session.

    Shared by every test marked `pulsar` (capture, alert sinks); stopped at the end.
    """
    from ingest.pulsar import cluster

    workdir = tmp_path_factory.mktemp("pulsar")
    try:
        state = cluster.up(workdir)
        print(f"\npulsar standalone started in {state.startup_s} s")  # noqa: T201
        yield state
    finally:
        _report_rss(workdir)
        cluster.down(workdir)


def _report_rss(workdir: Path) -> None:
    from ingest.pulsar import cluster, process

    state = cluster.load_state(workdir)
    for spec in state.processes if state else []:
        print(f"\n{spec.name} RSS {process.rss_mb(spec.pid)} MiB")  # noqa: T201
