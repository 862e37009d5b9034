"""`simulate run --json` and `simulate sweep --json` as typed, against
docs/json-output.schema.json (small runs: the simulator in Spark, no cluster)."""

from __future__ import annotations

import json
from pathlib import Path

from json_schema_check import SCHEMA, validate
from json_schema_check import cli_json as _json

from pulsar_audit.kinds import RUN_COUNTS


def test_simulate_run_json_follows_the_schema(spark, capsys, tmp_path: Path):
    out = tmp_path / "run"
    argv = ["simulate", "run", "--scenario", "unload", "--messages", "200", "--out", str(out)]
    result = _json(capsys, *argv, "--lakehouse", str(tmp_path / "lakehouse"))
    validate(result, "simulate_run")
    assert result["run_id"] == "sim-unload-1" and result["out"] == str(out)
    assert [f["action"] for f in result["faults"]] == ["unload"]
    assert {run["sent"] for run in result["runs"]} == {200}
    assert [o["cause"]["fault"]["action"] for o in result["outages"]] == ["unload"]
    assert {run["valid"] for run in result["runs"]} == {True}  # a JSON boolean, not "true"
    truth = json.loads((out / "truth.json").read_text())
    assert result["runs"] == [{**run, "valid": run["valid"] == "true"} for run in truth["runs"]]


def test_simulate_run_picks_the_bookies_its_scenario_needs(spark, capsys, tmp_path: Path):
    # kill-qw-bookies on 2-2-1 kills 2 bookies for good: 3 would leave no new ensemble
    out = tmp_path / "run"
    argv = ["simulate", "run", "--scenario", "kill-qw-bookies", "--messages", "100"]
    result = _json(capsys, *argv, "--out", str(out), "--lakehouse", str(tmp_path / "lakehouse"))
    assert result["run_id"] == "sim-kill-qw-bookies-1" and result["config"] == "2-2-1"
    assert json.loads((out / "truth.json").read_text())["scenario"]["bookies"] == 4


def test_simulate_run_rows_are_the_run_counts():
    """The documented simulated run row and the run summary's counts never drift apart."""
    row = SCHEMA["$defs"]["simulate_truth_run"]["properties"]
    assert [name for name in row if name in RUN_COUNTS] == list(RUN_COUNTS)
    assert set(row) == {"run_id", "topic", "subscription", *RUN_COUNTS, "valid"}


def test_simulate_sweep_json_follows_the_schema(spark, capsys, tmp_path: Path):
    # 2 combinations: a control run, and kill-qw-bookies on 3 bookies, which the model refuses
    grid = tmp_path / "grid.yaml"
    grid.write_text("scenario: [control, kill-qw-bookies]\nbookies: 3\nmessages: 100\n")
    out = tmp_path / "sweep"
    argv = ["simulate", "sweep", "--grid", str(grid), "--out", str(out)]
    result = _json(capsys, *argv, "--lakehouse", str(tmp_path / "lakehouse"))
    validate(result, "simulate_sweep")
    assert (result["done"], result["skipped"]) == (1, 1)
    assert result["manifest"] == str(out / "manifest.json")
    entries = json.loads((out / "manifest.json").read_text())["runs"]
    assert ["skipped" in entry for entry in entries] == [False, True]
