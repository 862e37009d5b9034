"""What one `watch` micro-batch costs, beside a cold `analyze` of the same trace, in one command.

    .venv/bin/python -m bench.watch_batches --messages 1e4 --chunks 3 [--workdir DIR]

The benchmark's simulated trace (bench/simulated.py) is cut by trace time into CHUNKS files,
each holding every client's events of its stretch, written into a landing folder. Then, one
after the other, each as a whole process: `pulsar-audit watch LANDING --once --max-files 1 -v`
(one micro-batch per chunk; the seconds of each come from its `stage micro-batch N` log line)
and `pulsar-audit analyze` of the whole trace into a new lakehouse (the reference). Prints each
micro-batch's seconds and its ratio to the analyze's wall. Figures depend on the machine's load:
the ratio, measured in the same command, is what to compare.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.simulated import main as simulate

CLI = [sys.executable, "-m", "jobs.cli"]
BATCH_LINE = re.compile(r"stage micro-batch (\d+): \d+ file\(s\): ([\d.]+) s")


def cut_into_chunks(trace: Path, landing: Path, chunks: int) -> list[int]:
    """Every event of `trace`'s files, cut by `ts` into `chunks` files under `landing`."""
    events = [
        line
        for path in sorted(trace.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    times = sorted(json.loads(line)["ts"] for line in events)
    bounds = [times[len(times) * k // chunks] for k in range(1, chunks)]
    parts: list[list[str]] = [[] for _ in range(chunks)]
    for line in events:
        ts = json.loads(line)["ts"]
        parts[sum(ts >= b for b in bounds)].append(line)
    landing.mkdir(parents=True)
    for number, lines in enumerate(parts, start=1):
        (landing / f"chunk-{number:03d}.jsonl").write_text("\n".join(lines) + "\n")
        time.sleep(0.05)  # chunk order by modification time
    return [len(lines) for lines in parts]


def timed(command: list[str], log: Path) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): see {log}")
    return time.monotonic() - started, done.stderr


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=float, default=1e4)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--workdir", default="/tmp/pulsar-audit-bench-watch")
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    trace = work / "trace"
    simulate(["--messages", str(args.messages), "--seed", "1", "--out", str(trace)])
    sizes = cut_into_chunks(trace, work / "landing", args.chunks)
    print(f"{int(args.messages):,} messages: {len(sizes)} chunks of {sizes} events")

    watch = [*CLI, "watch", str(work / "landing"), "--once", "--max-files", "1", "-v"]
    watch += ["--lakehouse", str(work / "lh-watch")]
    watch_wall, log = timed(watch, work / "watch.log")
    batches = [(int(n), float(s)) for n, s in BATCH_LINE.findall(log)]
    analyze = [*CLI, "analyze", str(trace), "--json", "--lakehouse", str(work / "lh-analyze")]
    analyze_wall, _ = timed(analyze, work / "analyze.log")

    print(f"analyze (cold process, whole trace): {analyze_wall:.1f} s")
    print(
        f"watch (cold process, {len(batches)} micro-batches and the final analyze): "
        f"{watch_wall:.1f} s"
    )
    for number, seconds in batches:
        print(f"  micro-batch {number}: {seconds:.1f} s = {seconds / analyze_wall:.2f} x analyze")


if __name__ == "__main__":
    main()
