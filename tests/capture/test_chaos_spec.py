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


def test_several_chaos_actions_parse_in_order_and_the_config_records_them_all() -> None:
    from capture.chaos import describe, parse_actions

    specs = parse_actions(["unload@1000", "wipe-qw-bookies-disk@3000"], hold_s=5.0)
    assert [(s.action, s.at_ack, s.hold_s) for s in specs] == [
        ("unload", 1000, 5.0), ("wipe-qw-bookies-disk", 3000, 5.0),
    ]  # fmt: skip
    assert describe(specs) == "unload@1000,wipe-qw-bookies-disk@3000"
    assert describe(parse_actions(["kill-bookies:2@5"])) == "kill-bookies:2@5"  # as before
    assert describe(()) is None
    assert parse_actions(["unload@10", "unload@10"])[1].at_ack == 10  # same mark: one by one
    with pytest.raises(UsageError, match=r"ACK_COUNTs must not decrease \(got 3000, 1000\)"):
        parse_actions(["wipe-qw-bookies-disk@3000", "unload@1000"])
    with pytest.raises(UsageError, match="ACTION@ACK_COUNT"):
        parse_actions(["unload@10", "wipe@20"])


def test_chaos_run_plans_a_cluster_for_every_action() -> None:
    from capture.scenarios import plan_chaos

    plan = plan_chaos("unload", 0.05, ["wipe-qw-bookies-disk@0.2"], 10_000)
    assert (plan.label, plan.chaos, plan.names) == (
        "unload+wipe-qw-bookies-disk", ["unload@500", "wipe-qw-bookies-disk@2000"],
        ["unload", "wipe-qw-bookies-disk"],
    )  # fmt: skip
    # the wipe's cluster and quorum (1 broker, 3 bookies, 2-2-1), paced: it is a fault
    assert (plan.brokers, plan.bookies, plan.config, plan.paced) == (1, 3, "2-2-1", True)
    plan = plan_chaos("kill-broker", 0.5, ["kill-bookies:3@0.5", "unload@0.9"], 100)
    assert (plan.chaos, plan.brokers, plan.bookies, plan.config) == (
        ["kill-broker@50", "kill-bookies:3@50", "unload@90"], 2, 5, "3-3-2",
    )  # fmt: skip
    single = plan_chaos("unload", 0.5, [], 20_000)  # one scenario: as before
    assert (single.label, single.chaos, single.config, single.paced) == (
        "unload", ["unload@10000"], "1-1-1", False,
    )  # fmt: skip
    assert plan_chaos("consumer-crash", 0.5, [], 100).chaos == []


def test_chaos_run_refuses_further_actions_it_cannot_run_soundly() -> None:
    from capture.scenarios import plan_chaos

    refused = {
        "a further action must be a cluster action.*consumer faults \\(consumer-crash, "
        "nack-redelivery\\) are whole scenarios": ("unload", ["consumer-crash@0.5"]),
        "--then control@0.5: a further action must be a cluster action": ("unload",
                                                                           ["control@0.5"]),
        "--scenario nack-redelivery has none": ("nack-redelivery", ["unload@0.5"]),
        "--scenario control has none": ("control", ["unload@0.5"]),
        "expected SCENARIO@FRACTION with 0 < FRACTION <= 1": ("unload", ["unload@1.5"]),
        "expected SCENARIO@FRACTION": ("unload", ["wipe-qw-bookies-disk"]),
        "--then 'unload@x'": ("unload", ["unload@x"]),
        "--then 'wipe@0.2': expected one of": ("unload", ["wipe@0.2"]),
        "must not be below the one before it \\(0.5\\)": ("unload", ["kill-broker@0.2"]),
    }  # fmt: skip
    for message, (scenario, then) in refused.items():
        with pytest.raises(UsageError, match=message):
            plan_chaos(scenario, 0.5, then, 1000)


def test_chaos_run_refuses_a_cluster_the_wipe_would_empty_before_starting_it(
    capsys: pytest.CaptureFixture, tmp_path
) -> None:  # noqa: ANN001
    from jobs.cli import main

    argv = ["chaos", "run", "--scenario", "unload", "--fault-at", "0.05", "--then",
            "wipe-qw-bookies-disk@0.2", "--workdir", str(tmp_path / "none")]  # fmt: skip
    assert main([*argv, "--bookies", "2"]) == 2
    assert "would wipe every one of the cluster's 2 bookies" in capsys.readouterr().err
    assert main([*argv, "--then", "nack-redelivery@0.5"]) == 2
    assert "a further action must be a cluster action" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()  # no cluster was started
