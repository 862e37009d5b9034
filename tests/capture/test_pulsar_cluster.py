"""A multi-process cluster (ZooKeeper, 3 bookies, 2 brokers): kill -9 the topic's broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pulsar_traces import capture_opts, trace_events

from capture import cluster, process
from capture.chaos import ChaosSpec
from capture.harness import capture

pytestmark = [pytest.mark.pulsar, pytest.mark.slow]

MESSAGES = 10_000


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("pulsar-multi")
    try:
        state = cluster.up(workdir, brokers=2, bookies=3)
        print(f"\nmulti-process cluster started in {state.startup_s} s")  # noqa: T201
        yield state
    finally:
        cluster.down(workdir)


def _capture_with(multi, tmp_path: Path, action: str):  # noqa: ANN001, ANN202
    """Capture MESSAGES with `action` at half of them; (out dir, chaos event, victim spec)."""
    out = tmp_path / action
    opts = capture_opts(
        multi,
        out,
        topic=action,
        messages=MESSAGES,
        config=(2, 2, 2),
        chaos=ChaosSpec.parse(f"{action}@{MESSAGES // 2}"),
        scenario=action,
    )
    summary = capture(opts, multi)
    assert "error" not in summary["chaos"], summary["chaos"]
    chaos, end = trace_events(out, "chaos")  # the fault, then its end (the restart)
    assert (chaos["phase"], end["phase"]) == ("start", "end")
    return out, chaos, multi.get(chaos["target"])


# long tier; in the default run: the bookie killed on the same cluster
@pytest.mark.long
def test_kill_broker_loses_no_acknowledged_message(multi, tmp_path: Path) -> None:
    out, chaos, victim = _capture_with(multi, tmp_path, "kill-broker")
    assert victim.role == "broker"
    assert chaos["pid"] != victim.pid  # the state now has the restarted process
    assert process.is_alive(victim.pid)

    acked = {event["seq"] for event in trace_events(out, "ack")}
    received = {event["seq"] for event in trace_events(out, "receive")}
    assert len(trace_events(out, "end")) == 1
    assert acked - received == set()  # nothing acknowledged went missing
    assert (out / "logs" / "broker" / f"{victim.name}.log").stat().st_size > 0
    assert sorted(p.name for p in (out / "logs" / "bookie").iterdir()) == [
        "bookie-1.log",
        "bookie-2.log",
        "bookie-3.log",
    ]


def test_kill_bookie_restarts_it_and_loses_no_acknowledged_message(multi, tmp_path: Path) -> None:
    out, chaos, victim = _capture_with(multi, tmp_path, "kill-bookie")
    assert victim.role == "bookie" and chaos["pid"] != victim.pid
    # Down longer than its ZooKeeper session, the restarted bookie registers and stays up.
    time.sleep(5)
    assert process.is_alive(victim.pid)
    log = (out / "logs" / "bookie" / f"{victim.name}.log").read_text()
    assert "LockBusyException" not in log
    acked = {event["seq"] for event in trace_events(out, "ack")}
    received = {event["seq"] for event in trace_events(out, "receive")}
    assert len(acked) == MESSAGES and acked - received == set()
