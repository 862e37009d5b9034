"""Benchmark: simulate one large run and print generation time and peak memory.

    .venv/bin/python scripts/bench_simulate.py --messages 10000000 --scenario isolate-broker

Per-message data stays in Spark (spark.range → trace files); the driver holds the plan and
the truth's small aggregates. Figures are printed, not asserted: wall-clock seconds, the
Python driver's peak RSS, and the Spark JVM's peak RSS (VmHWM, local mode: driver and
executors are that one JVM).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import time
from pathlib import Path

from pulsar_audit.config import load_config
from pulsar_audit.spark import get_spark
from simulate.run import simulate_run
from simulate.scenario import scenario_from


def jvm_peak_mb(spark) -> float | None:  # noqa: ANN001
    """VmHWM of the Spark JVM (Linux), in MB."""
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--scenario", default="isolate-broker")
    parser.add_argument("--config", default="2-2-1")
    parser.add_argument("--workdir", default="/tmp/pulsar-audit-bench-simulate")
    args = parser.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    config = load_config("local", lakehouse=str(work / "lakehouse"))
    spark = get_spark(config)
    scenario = scenario_from(
        {
            "scenario": args.scenario,
            "config": args.config,
            "messages": args.messages,
            "bookies": 5,
            "ack_return_us": 1500,
            "redeliver_every": 0,
        }
    )
    started = time.monotonic()
    truth = simulate_run(spark, scenario, work / "run")
    seconds = time.monotonic() - started
    files = list((work / "run").glob("*.jsonl.gz"))
    size = sum(f.stat().st_size for f in files)
    print(f"messages            {args.messages}")
    print(f"scenario            {args.scenario} {args.config}")
    print(f"generate_s          {seconds:.1f}")
    print(f"messages/s          {args.messages / seconds:,.0f}")
    print(f"trace files         {len(files)} ({size / 1e6:.1f} MB gzip)")
    print(f"driver peak RSS MB  {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
    print(f"JVM peak RSS MB     {jvm_peak_mb(spark)}")
    print(f"truth runs          {truth['runs']}")
    print(f"truth outages       {[round(o['duration_ms'], 1) for o in truth['outages']]}")


if __name__ == "__main__":
    main()
