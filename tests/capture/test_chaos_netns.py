"""A namespaced cluster (ZooKeeper, 2 bookies, 1 broker, each in its own network namespace):
a bookie cut off from ZooKeeper keeps serving the broker, and nothing acknowledged is lost.

The default run's one chaos scenario (Done-when (c) of issue 11); the longer ones are in
test_chaos_scenarios.py behind the `chaos` marker. The run is `pulsar-audit chaos run --json`
as typed, on the running cluster (--workdir), so its output is checked against
docs/json-output.schema.json on a real run (issue 16) at no extra cost.
"""

from __future__ import annotations

import json

import pytest
from json_schema_check import validate
from pulsar_traces import trace_events

from capture import cluster, netns

pytestmark = [
    pytest.mark.pulsar,
    pytest.mark.slow,
    pytest.mark.skipif(
        netns.unavailable_reason() is not None, reason=str(netns.unavailable_reason())
    ),
]

MESSAGES = 3000


@pytest.fixture(scope="module")
def small_netns(tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("pulsar-netns")
    try:
        state = cluster.up(workdir, brokers=1, bookies=2, netns=True, session_ms=10_000)
        print(f"\nnamespaced cluster started in {state.startup_s} s")  # noqa: T201
        yield state
    finally:
        cluster.down(workdir)


def test_bookie_isolated_from_zookeeper_loses_nothing(
    small_netns, lakehouse, config, tmp_path, capsys
):

    from jobs.cli import main
    from serve.summary import anomaly_rows

    out = tmp_path / "isolate-bookie"
    argv = ["chaos", "run", "--scenario", "isolate-bookie-from-zk", "--netns", "--workdir"]
    argv += [small_netns.workdir, "--messages", str(MESSAGES), "--rate", "200", "--fault-at"]
    argv += ["0.2", "--hold-s", "14", "--out", str(out), "--lakehouse", str(config.lakehouse_path)]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    validate(result, "chaos_run")

    capture = result["capture"]
    assert capture["chaos"]["action"] == "isolate-bookie-from-zk", capture["chaos"]
    assert "error" not in capture["chaos"] and capture["chaos"]["duration_s"] >= 14.0
    assert (capture["out"], capture["consume"]["received"]) == (str(out), MESSAGES)
    start, end = trace_events(out, "chaos")
    assert (start["phase"], end["phase"]) == ("start", "end")
    assert start["target"].startswith("bookie-") and end["rules_removed"] == 4
    acked = {event["seq"] for event in trace_events(out, "ack")}
    received = {event["seq"] for event in trace_events(out, "receive")}
    assert (capture["acked"], capture["nacked"]) == (MESSAGES, 0) and acked - received == set()

    # The bookie really lost its ZooKeeper session while it kept taking writes.
    bookie_log = (out / "logs" / "bookie" / f"{start['target']}.log").read_text()
    assert "expired" in bookie_log.lower()

    [run] = result["runs"]
    assert run["run_id"] == capture["run_id"]
    assert (run["acked"], run["lost"], run["duplicated"], run["valid"]) == (MESSAGES, 0, 0, True)
    kinds = {row["event_type"] for row in _infra(lakehouse, start["target"])}
    assert "zk_session_lost" in kinds, kinds
    assert anomaly_rows(lakehouse) == [] and result["anomalies"] == []


def _infra(lakehouse, host: str) -> list[dict]:  # noqa: ANN001
    from pyspark.sql import functions as F

    events = lakehouse.read("infra_events").filter(F.col("host") == host)
    return [row.asDict() for row in events.select("event_type").distinct().collect()]
