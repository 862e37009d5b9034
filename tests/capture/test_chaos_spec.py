"""Parsing of chaos actions and scenario names, and the study's outage table (no cluster)."""

from __future__ import annotations

import pytest

from capture.chaos import ChaosSpec
from capture.scenarios import parse_scenario
from capture.study import outage_table
from pulsar_audit.errors import UsageError


def test_chaos_spec_parses_counts_and_rejects_what_it_cannot_do() -> None:
    spec = ChaosSpec.parse("kill-bookies:2@500", hold_s=9.0)
    assert (spec.action, spec.count, spec.at_ack, spec.hold_s, spec.label) == (
        "kill-bookies", 2, 500, 9.0, "kill-bookies:2",
    )  # fmt: skip
    assert ChaosSpec.parse("isolate-broker-from-zk@10").label == "isolate-broker-from-zk"
    for bad in ("kill-broker:2@5", "kill-bookies:0@5", "isolate-zk@5", "unload@0", "unload"):
        with pytest.raises(UsageError, match="ACTION@ACK_COUNT"):
            ChaosSpec.parse(bad)


def test_scenario_names_include_the_simulators() -> None:
    assert parse_scenario("isolate-broker") == ("isolate-broker-from-zk", 2)
    assert parse_scenario("kill-bookies:3") == ("kill-bookies", 3)
    with pytest.raises(UsageError, match="expected one of"):
        parse_scenario("kill-broker:2")


def test_outage_table_per_scenario() -> None:
    runs = [
        {"run_id": "u1", "scenario": "unload"},
        {"run_id": "u2", "scenario": "unload"},
        {"run_id": "t1", "scenario": "transfer"},
    ]
    outages = [
        {"run_id": "u1", "duration_ms": 110.0, "backoff_step": 1},
        {"run_id": "u2", "duration_ms": 320.0, "backoff_step": 2},
    ]
    unload, transfer = outage_table(runs, outages)
    assert unload == {
        "scenario": "unload", "runs": 2, "runs_with_outage": 2, "outages": 2,
        "median_ms": 215.0, "p99_ms": 320.0, "max_ms": 320.0,
        "backoff_steps": {"1": 1, "2": 1},
    }  # fmt: skip
    assert (transfer["outages"], transfer["median_ms"]) == (0, None)
