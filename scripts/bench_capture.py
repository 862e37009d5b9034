"""Benchmark: start a fresh Pulsar standalone, capture a control run, print the figures, stop.

    .venv/bin/python scripts/bench_capture.py [--messages 100000] [--workdir DIR]

Prints startup time, produce and read rates, events written and the broker's RSS.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from capture import cluster, process
from capture.harness import CaptureOptions, capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workdir", help="default: a temporary directory")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="pulsar-bench-"))
    try:
        state = cluster.up(workdir)
        broker = state.processes[0]
        idle_rss = process.rss_mb(broker.pid)
        started = time.monotonic()
        opts = CaptureOptions(
            service_url=state.service_url,
            admin_url=state.admin_url,
            topic="bench",
            messages=args.messages,
            out=workdir / "trace",
        )
        summary = capture(opts, state)
        figures = {
            "startup_s": state.startup_s,
            "messages": args.messages,
            "produce_rate_msgs_per_s": summary["produce_rate"],
            "read_rate_msgs_per_s": summary["consume"]["read_rate"],
            "capture_total_s": round(time.monotonic() - started, 1),
            "events_written": summary["events"],
            "trace_mb": round(sum(p.stat().st_size for p in opts.out.glob("*.jsonl")) / 2**20, 1),
            "broker_rss_mb_idle": idle_rss,
            "broker_rss_mb_after": process.rss_mb(broker.pid),
        }
        print(json.dumps(figures, indent=1))
    finally:
        cluster.down(workdir)


if __name__ == "__main__":
    main()
