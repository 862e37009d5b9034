"""`simulate sweep`: every combination of a grid of scenario options, one folder per run."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import SparkSession

from pulsar_audit.errors import InputError, UsageError
from simulate.consumers import span_bound_us
from simulate.scenario import DAY_US, Scenario, validate

MANIFEST = "manifest.json"
SMALL_RUN_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
}


def load_grid(path: str | Path) -> dict[str, list[Any]]:
    """The grid file: a mapping of option → value or list of values."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"grid file {file} does not exist")
    try:
        raw = yaml.safe_load(file.read_text())  # JSON is YAML too
    except yaml.YAMLError as exc:
        raise InputError(f"{file}: not valid JSON or YAML: {exc}") from exc
    if not isinstance(raw, dict) or "scenario" not in raw:
        raise InputError(f"{file}: expected a mapping with at least 'scenario' (a list of names)")
    return {k: v if isinstance(v, list) else [v] for k, v in raw.items()}


def combinations(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = sorted(grid)
    return [
        dict(zip(keys, values, strict=True))
        for values in itertools.product(*(grid[k] for k in keys))
    ]


def run_days(scenario: Scenario) -> range:
    """The UTC days (counted from the epoch) the run's events can fall on."""
    before, after = span_bound_us(scenario)
    return range((scenario.t0_us - before) // DAY_US, (scenario.t0_us + after) // DAY_US + 1)


def place(scenario: Scenario, taken: set[int]) -> Scenario:
    """The scenario, moved on by whole days until none of its days, nor the day before or
    after, is taken by an earlier run of the sweep; then its days are taken. Runs of one sweep
    thus never overlap and lie at least a whole day apart (cause windows are seconds)."""

    def clashes(days: range) -> bool:
        return any(day in taken for day in range(days.start - 1, days.stop + 1))

    while clashes(run_days(scenario)):
        scenario = replace(scenario, t0_us=scenario.t0_us + DAY_US)
    taken.update(run_days(scenario))
    return scenario


def run_sweep(
    spark: SparkSession,
    grid_file: str | Path,
    out: str | Path,
    threshold_ms: int,
    ladder: list[int],
    limit: int | None = None,
) -> dict[str, Any]:
    """Simulate each grid combination into out/<run_id>/; write out/manifest.json."""
    from simulate.run import simulate_run
    from simulate.scenario import scenario_from

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    # Many small runs: per-job overhead dominates, so few shuffle partitions and no codegen.
    for key, value in SMALL_RUN_CONF.items():
        spark.conf.set(key, value)
    entries: list[dict[str, Any]] = []
    taken: set[int] = set()  # days holding a run of this sweep
    done = 0
    for n, values in enumerate(combinations(load_grid(grid_file))):
        if limit is not None and done >= limit:
            break
        label = "-".join(str(values[k]).replace(":", "") for k in sorted(values))
        values = {**values, "run_id": values.get("run_id") or f"sweep-{n:05d}-{label}"[:120]}
        try:
            scenario = validate(scenario_from(values))
        except UsageError as exc:
            entries.append({"run_id": values["run_id"], "values": values, "skipped": str(exc)})
            continue
        scenario = place(scenario, taken)
        truth = simulate_run(spark, scenario, root / scenario.run_id, threshold_ms, ladder)
        done += 1
        entries.append(
            {
                "run_id": scenario.run_id,
                "folder": scenario.run_id,
                "values": values,
                "runs": truth["runs"],
                "outages": len(truth["outages"]),
                "anomaly_blocks": len(truth["anomalies"]),
                "t0_us": scenario.t0_us,
                "generate_s": truth["generate_s"],
            }
        )
    manifest = root / MANIFEST
    manifest.write_text(json.dumps({"grid": str(grid_file), "runs": entries}, indent=1) + "\n")
    return {
        "done": done,
        "skipped": sum(1 for e in entries if "skipped" in e),
        "manifest": str(manifest),
    }
