"""The simulator beside the real positives of data/real-runs (issue 27): each real run of the
disk-loss and duplicate series simulated with the same configuration, fault, fault time, rate
and reader, and their counts and labels side by side (docs/risk.md).

    .venv/bin/python scripts/real_counterparts.py [--out DIR] [--series issue-27-item-1,...]

The fault time is the real trace's (the share of its sends before the first `chaos` event);
the rate is the manifest's (`rate`, else the trace's); a wipe restarts its bookies 12 s later
as the harness does; metadata sessions 10 s; the duplicate series' brokers shut down on
session loss (docs/chaos.md: `--session-expired shutdown`), the others' reconnect. The
labels are models.features' (`run_outcomes`) on the simulator's expected summary rows, as the
evaluation derives them from gold for the real run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from models.features import run_outcomes
from pulsar_audit.config import load_config
from pulsar_audit.paths import REPO_ROOT
from pulsar_audit.schemas import ANOMALIES, OUTAGES, RUN_SUMMARY
from pulsar_audit.spark import get_spark
from simulate.run import simulate_run
from simulate.scenario import scenario_from

MANIFEST = REPO_ROOT / "data" / "real-runs" / "manifest.jsonl"
SCENARIO = {"isolate-broker-from-zk": "isolate-broker"}
COUNTS = ("acked", "received", "lost", "unseen", "duplicated")
SESSION_EXPIRED = {"issue-27-item-2": "shutdown"}  # the brokers' policy in that series


def _trace_shape(archive: Path) -> tuple[float, float]:
    """(share of the sends before the first chaos event, sends per second) of a real trace."""
    sends, chaos = [], []
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if "/trace-" not in member.name or not member.name.endswith(".jsonl"):
                continue
            for line in tar.extractfile(member):
                event = json.loads(line)
                if event["event"] == "send":
                    sends.append(event["ts"])
                elif event["event"] == "chaos":
                    chaos.append(event["ts"])
    sends.sort()
    before = sum(1 for ts in sends if ts < min(chaos))
    return before / len(sends), len(sends) / ((sends[-1] - sends[0]) / 1000)


def counterpart(run: dict[str, Any]) -> dict[str, Any]:
    """The simulator's options for a real run of the data set."""
    fault_at, rate = _trace_shape(MANIFEST.parent / run["archive"])
    interval = int(1e6 / (run.get("rate") or rate))
    values = {
        "scenario": SCENARIO.get(run["scenario"], run["scenario"]),
        "config": run["config"],
        "bookies": run["bookies"],
        "brokers": run["brokers"],
        "messages": run["messages"],
        "dedup": run["dedup"],
        "fault_at": round(fault_at, 3),
        "interval_us": interval,
        "latency_us": max(2000, interval + 500),  # the model keeps one message in flight
        "in_flight": run.get("in_flight") or 1000,
        "ack_return_us": 1500,
        "session_timeout_ms": 10_000,
        "session_expired": SESSION_EXPIRED.get(run.get("series"), "reconnect"),
        "auto_skip": bool(run.get("skip_lost_data")),
        "redeliver_every": 0,
        "run_id": f"sim-{run['run_id']}",
    }
    if values["scenario"].startswith("wipe-"):
        values["bookie_restart_ms"] = 12_000
    return values


def _reader(rows: list[dict[str, Any]], skipping: bool) -> dict[str, Any]:
    """The simulated reader that reads as the real one: the skipping reader when it skipped."""
    name = "reader-skip" if skipping else "reader-1"
    return next(r for r in rows if r["subscription"] == name)


def labels(spark: SparkSession, run_id: str, rows: list[dict[str, Any]]) -> tuple:
    """(acked_loss, duplicates) as the evaluation derives them from gold.run_summary rows."""
    longs = [f.name for f in RUN_SUMMARY.fields if f.dataType.typeName() == "long"]
    summary = [
        {
            **{f.name: None for f in RUN_SUMMARY.fields},
            **{k: int(r.get(k) or 0) for k in longs},
            "run_id": run_id,
            "topic": "t",
            "subscription": r["subscription"],
            "valid": str(r["valid"]).lower(),
            "reasons": [],
        }
        for r in rows
    ]
    frames = [spark.createDataFrame(summary, RUN_SUMMARY)]
    frames += [spark.createDataFrame([], schema) for schema in (ANOMALIES, OUTAGES)]
    row = run_outcomes(*frames).first()
    return row["acked_loss"], row["duplicates"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/real-counterparts", help="simulated runs go here")
    p.add_argument("--series", default="issue-27-item-1,issue-27-item-2")
    args = p.parse_args(argv)
    series = set(args.series.split(","))
    runs = [json.loads(x) for x in MANIFEST.read_text().splitlines() if x.strip()]
    spark = get_spark(load_config("local"))
    head = "| real run | config, fault | real: " + ", ".join(COUNTS) + " | labels | simulated |"
    print(head + " labels |\n|---|---|---|---|---|---|")
    for run in (r for r in runs if r.get("series") in series):
        values = counterpart(run)
        truth = simulate_run(spark, scenario_from(values), Path(args.out) / values["run_id"])
        sim = _reader(truth["runs"], values["auto_skip"])
        real_labels = labels(spark, run["run_id"], run["readers"])
        sim_labels = labels(spark, values["run_id"], truth["runs"])
        setting = (
            f"{run['config']} {run['scenario']} on {run['bookies']} bookies, "
            f"{1e6 / values['interval_us']:.0f} msg/s, fault at {values['fault_at']:.0%}"
            f"{', skip' if values['auto_skip'] else ''}{', dedup' if run['dedup'] else ''}"
            f"{', batching' if run.get('batching') else ''}"
        )
        real_counts = ", ".join(str(run["readers"][0].get(k, 0)) for k in COUNTS)
        sim_counts = ", ".join(str(sim.get(k, 0)) for k in COUNTS)
        print(
            f"| {run['run_id']} | {setting} | {real_counts} | {real_labels} | {sim_counts} | "
            f"{sim_labels} |",
            flush=True,
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
