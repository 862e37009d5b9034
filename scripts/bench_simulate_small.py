"""Benchmark: small simulated runs with their frames kept (simulate.run.KEEP_UP_TO) against
the same runs recomputing them, interleaved in one Spark session; prints figures.

    .venv/bin/python scripts/bench_simulate_small.py --runs control,isolate-broker --rounds 2

Each run is one of the agreement suite's scenarios (tests/simulate/test_agreement.py, the
suite's setup simulates all 18), at --messages messages. Per run: wall seconds and CPU
seconds of the Spark JVM plus the Python driver (from /proc: on a shared machine the CPU is
the figure that compares), and whether both ways wrote the same truth. Rounds alternate the
order (recompute, keep / keep, recompute) so that neither way always runs on a warmer JVM.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "simulate")]

from spark_test_conf import TEST_SPARK_CONF  # noqa: E402
from test_agreement import SMALL, SUITE  # noqa: E402

import simulate.run as simulate_module  # noqa: E402
from pulsar_audit.config import load_config  # noqa: E402
from pulsar_audit.spark import get_spark  # noqa: E402
from simulate.scenario import scenario_from  # noqa: E402

WAYS = {"recompute": 0, "keep": sys.maxsize}  # kept at any --messages


def cpu_seconds(jvm_pid: int) -> float:
    """CPU seconds so far of the Spark JVM (user + system) and of this Python process."""
    fields = Path(f"/proc/{jvm_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + time.process_time()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", default="control,isolate-broker,key-shared-reorder")
    parser.add_argument("--messages", type=int, default=SMALL["messages"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-simulate-small-"))
    config = load_config("local", lakehouse=str(work / "lakehouse"))
    spark = get_spark(config, extra_conf={**TEST_SPARK_CONF, "spark.master": "local[2]"})
    jvm_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    pipeline = config.pipeline
    truths: dict[str, dict] = {}
    totals = {way: [0.0, 0.0] for way in WAYS}

    def simulate(run_id: str, way: str, n: int) -> tuple[float, float, bool]:
        simulate_module.KEEP_UP_TO = WAYS[way]
        options = {**SMALL, **SUITE[run_id], "messages": args.messages, "run_id": run_id}
        wall, cpu = time.monotonic(), cpu_seconds(jvm_pid)
        truth = simulate_module.simulate_run(
            spark,
            scenario_from(options),
            work / f"{n}-{way}" / run_id,
            pipeline.outage_threshold_ms,
            list(pipeline.backoff_ladder_ms),
            stuck_key_ms=pipeline.stuck_key_ms,
        )
        wall, cpu = time.monotonic() - wall, cpu_seconds(jvm_pid) - cpu
        truth.pop("generate_s")
        return wall, cpu, truths.setdefault(run_id, truth) == truth

    runs = args.runs.split(",")
    simulate(runs[0], "recompute", -1)  # the JVM's first run (class loading, JIT) counts for none
    print(f"{'round':>5} {'run':24} {'way':10} {'wall s':>7} {'CPU s':>7} same truth")
    for n in range(args.rounds):
        for run_id in runs:
            for way in list(WAYS)[:: 1 if n % 2 == 0 else -1]:
                wall, cpu, same = simulate(run_id, way, n)
                totals[way][0] += wall
                totals[way][1] += cpu
                print(f"{n:>5} {run_id:24} {way:10} {wall:7.1f} {cpu:7.1f} {same}", flush=True)
    (rw, rc), (kw, kc) = totals["recompute"], totals["keep"]
    print(f"total recompute {rw:.1f} s wall, {rc:.1f} CPU s; keep {kw:.1f} s wall, {kc:.1f} CPU s")
    print(f"keep / recompute: wall {kw / rw:.2f}, CPU {kc / rc:.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
