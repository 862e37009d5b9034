"""A real Pulsar standalone for the whole session, started here on free loopback ports."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.pulsar import cluster, process


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory):
    """A Pulsar standalone (ZooKeeper metadata) in a temporary work dir, stopped at the end."""
    workdir = tmp_path_factory.mktemp("pulsar")
    try:
        state = cluster.up(workdir)
        print(f"\npulsar standalone started in {state.startup_s} s")  # noqa: T201
        yield state
    finally:
        report_rss(workdir)
        cluster.down(workdir)


def report_rss(workdir: Path) -> None:
    state = cluster.load_state(workdir)
    for spec in state.processes if state else []:
        print(f"\n{spec.name} RSS {process.rss_mb(spec.pid)} MiB")  # noqa: T201
