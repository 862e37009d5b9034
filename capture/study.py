"""Unload versus transfer: N real runs of each on a two-broker cluster with the extensible load
manager, and the producers' outage distribution side by side.

Each run produces at a steady rate and, halfway, either unloads the topic's bundle (its
producers are disconnected and look the topic up again, retrying with backoff) or transfers it
to the other broker (PIP-192: the old owner tells the clients where the bundle went). `analyze`
finds every outage; the table gives per scenario: runs, outages, median, p99 and max duration
and the client backoff step each outage lands on.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from capture import cluster
from capture.chaos import ChaosSpec
from capture.harness import CaptureOptions, capture, new_run_id, parse_config

STUDY_SCENARIOS = ("unload", "transfer")


def run_study(
    workdir: Path, out: Path, scenarios: list[str], repeat: int, messages: int, rate: float
) -> list[dict]:
    """Capture `repeat` runs of each scenario (interleaved) into `out`; their capture summaries."""
    state = cluster.running(workdir)
    started_here = state is None
    if state is None:
        state = cluster.up(workdir, brokers=2, bookies=1, load_manager="extensible")
    summaries = []
    try:
        for _ in range(repeat):
            for scenario in scenarios:
                run_id = new_run_id(scenario)
                opts = CaptureOptions(
                    service_url=state.service_url, admin_url=state.admin_url, topic=run_id,
                    messages=messages, out=out / run_id, config=parse_config("1-1-1"),
                    chaos=ChaosSpec.parse(f"{scenario}@{messages // 2}"), scenario=scenario,
                    run_id=run_id, rate=rate,
                )  # fmt: skip
                summaries.append({"scenario": scenario, **capture(opts, state)})
    finally:
        if started_here:
            cluster.down(workdir)
    return summaries


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def outage_table(runs: list[dict], outages: list[dict]) -> list[dict]:
    """Per scenario: runs, outages, runs with one, median/p99/max ms and backoff steps."""
    scenario_of = {run["run_id"]: run["scenario"] for run in runs}
    rows = []
    for scenario in dict.fromkeys(run["scenario"] for run in runs):
        mine = [o for o in outages if scenario_of.get(o["run_id"]) == scenario]
        durations = [float(o["duration_ms"]) for o in mine]
        steps = Counter(str(o.get("backoff_step")) for o in mine)
        rows.append(
            {
                "scenario": scenario,
                "runs": sum(1 for run in runs if run["scenario"] == scenario),
                "runs_with_outage": len({o["run_id"] for o in mine}),
                "outages": len(mine),
                "median_ms": round(statistics.median(durations), 1) if durations else None,
                "p99_ms": round(_p99(durations), 1) if durations else None,
                "max_ms": round(max(durations), 1) if durations else None,
                "backoff_steps": dict(sorted(steps.items())),
            }
        )
    return rows
