"""Shared fixtures: one local Spark session with Delta from the jar cache, tables under tmp_path."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest
from opt_in import opt_in_skips
from spark_test_conf import TEST_SPARK_CONF

from pulsar_audit.config import Config, load_config
from pulsar_audit.delta_io import Lakehouse

# PULSAR_AUDIT_LONG=1 runs every long suite the default run (CI) leaves out: each has its own
# switch too (the chaos grid, the long tier, the long reliability suites, deployment).
LONG_SWITCHES = {
    "PULSAR_AUDIT_CHAOS": "1",
    "PULSAR_AUDIT_LONG_TESTS": "1",
    "PULSAR_AUDIT_RELIABILITY": "long",
}


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PULSAR_AUDIT_LONG") != "1":
        return
    for name, value in LONG_SWITCHES.items():
        os.environ.setdefault(name, value)
    if config.option.markexpr == "not deploy":  # the default deselection in pyproject.toml
        config.option.markexpr = ""


# `make test` runs the suite on two pytest-xdist workers (`--dist loadgroup`): each test goes
# to a worker with the others of its group, so that what a group shares is set up once.
# Everything that talks to a real Pulsar or ZooKeeper (one standalone per session, fixed
# cluster processes, network namespaces) is one group; the folders whose session fixtures
# build a lakehouse or a model store are one group each; any other module is its own group
# (its module fixtures, e.g. an analyze of the examples, then run once).
CLUSTER_MARKERS = ("pulsar", "zookeeper")
CLUSTER_FOLDERS = ("capture", "zk")
SESSION_FIXTURE_FOLDERS = ("serve", "reliability", "models")


# tryfirst: xdist's own hook (registered in each worker after this conftest, so called before
# it otherwise) turns the marker into the `@group` suffix of the node id that the scheduler
# groups by; a marker added after it groups nothing (every module fixture was set up once per
# worker that got one of its tests).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skips = opt_in_skips(config.option.markexpr or "", os.environ)
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_worker_group(item)))
        for marker, skip in skips.items():
            if item.get_closest_marker(marker):
                item.add_marker(skip)


def _worker_group(item: pytest.Item) -> str:
    folder = Path(item.path).parent.name
    if folder in CLUSTER_FOLDERS or any(item.get_closest_marker(m) for m in CLUSTER_MARKERS):
        return "cluster"
    if folder in SESSION_FIXTURE_FOLDERS:
        return folder
    return item.nodeid.split("::")[0]


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
def standalone_started(tmp_path_factory: pytest.TempPathFactory):
    """A real Pulsar standalone (ZooKeeper metadata) on free loopback ports, for the session,
    started as a user does (`pulsar-audit cluster up --json`): (its state, the printed JSON).

    Shared by every test marked `pulsar` (capture, alert sinks); stopped at the end.
    """
    from capture import cluster
    from jobs.cli import main

    workdir = tmp_path_factory.mktemp("pulsar")
    try:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["cluster", "up", "--workdir", str(workdir), "--json"])
        state = cluster.running(workdir)
        if code != 0 or state is None:
            pytest.fail(f"`cluster up` exited {code} and left no running cluster in {workdir}")
        print(f"\npulsar standalone started in {state.startup_s} s")  # noqa: T201
        yield state, json.loads(printed.getvalue())
    finally:
        _report_rss(workdir)
        cluster.down(workdir)


@pytest.fixture(scope="session")
def standalone(standalone_started):
    """The running standalone's ClusterState."""
    return standalone_started[0]


def _report_rss(workdir: Path) -> None:
    from capture import process, processes

    state = processes.load_state(workdir)
    for spec in state.processes if state else []:
        print(f"\n{spec.name} RSS {process.rss_mb(spec.pid)} MiB")  # noqa: T201
