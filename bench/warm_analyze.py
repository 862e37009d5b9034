"""Warm `analyze`: a chaos tester's loop (one new run after another into one lakehouse),
each run analyzed cold (its own JVM) and warm (through `pulsar-audit server`), in the same
invocation, beside a bare Spark+Delta session started in the same command.

    .venv/bin/python -m bench.warm_analyze --workdir DIR [--messages 10000] [--runs 3]
        [--inputs FOLDER,FOLDER…]

The inputs are `--runs` simulated runs of `--messages` messages (bench/simulated.py, seeds
1…N, each with its own run ids), or the folders given. Two new lakehouses: each input is
analyzed into the first by a whole cold `pulsar-audit analyze --json` process
(PULSAR_AUDIT_SERVER=off) and into the second by the same command while a server this
script started for it runs (the process is then the client; the job runs in the server),
cold first for the first input, warm first for the next, and so on.
Per input: both walls, their ratio, each against the bare session, and whether both printed
the same result (timings aside). Exits 1 when a result differs, a call fails, or the server
did not run every warm job. The figures
depend on the machine's load, printed with them: compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.measure import Measured, run_measured
from bench.warm_answers import EXE, _load, _server


def timeless(result: Any) -> Any:
    """An `analyze --json` result without its timings (the only part two runs differ in)."""
    if isinstance(result, dict):
        return {k: timeless(v) for k, v in result.items() if k != "seconds"}
    if isinstance(result, list):
        return [timeless(v) for v in result]
    return result


def simulated_inputs(workdir: Path, messages: int, runs: int, logs: Path) -> list[Path]:
    """`runs` simulated traces of `messages` messages, each with run ids of its own."""
    made = []
    for n in range(1, runs + 1):
        out = workdir / "traces" / f"loop{n}"
        if not out.is_dir():
            command = [sys.executable, "-m", "bench.simulated", "--messages", str(messages)]
            command += ["--seed", str(n), "--out", str(out), "--prefix", f"loop{n}"]
            done = run_measured(f"generate-loop{n}", command, logs, Path.cwd())
            if done.status != "ok":
                raise SystemExit(f"generating {out} failed: {done.stderr[-2000:]}")
        made.append(out)
    return made


def _analyze(name: str, folder: Path, lakehouse: Path, logs: Path, mode: str) -> Measured:
    command = [str(EXE), "analyze", str(folder), "--json", "--lakehouse", str(lakehouse)]
    return run_measured(name, command, logs, Path.cwd(), env={"PULSAR_AUDIT_SERVER": mode})


def _result(done: Measured) -> Any:
    try:
        return timeless(json.loads(done.stdout)) if done.status == "ok" else None
    except ValueError:
        return None


def measure(workdir: Path, inputs: list[Path], logs: Path) -> dict[str, Any]:
    cold_lh, warm_lh = workdir / "lakehouses" / "cold", workdir / "lakehouses" / "warm"
    for lakehouse in (cold_lh, warm_lh):
        if lakehouse.exists():
            raise SystemExit(f"{lakehouse} exists: give a new --workdir")
    load_before = os.getloadavg()
    bare_command = [sys.executable, "-m", "bench.bare_spark", str(workdir / "bare")]
    bare = run_measured("bare-spark", bare_command, logs, Path.cwd())
    started = _server("start", str(warm_lh), "--idle-timeout", "900")
    rows = []
    try:
        for n, folder in enumerate(inputs):
            # each side goes first every other input (the page cache, the machine's moment)
            cold_first = n % 2 == 0
            if cold_first:
                cold = _analyze(f"cold-{folder.name}", folder, cold_lh, logs, "off")
            warm = _analyze(f"warm-{folder.name}", folder, warm_lh, logs, "")
            if not cold_first:
                cold = _analyze(f"cold-{folder.name}", folder, cold_lh, logs, "off")
            result = _result(cold)
            records = (result or {}).get("ingest", {}).get("records")
            rows.append(
                {
                    "input": str(folder),
                    "records": records,
                    "cold_s": round(cold.wall_s, 2),
                    "cold_cpu_s": round(cold.cpu_s, 2),
                    "warm_s": round(warm.wall_s, 2),
                    "ratio": round(cold.wall_s / warm.wall_s, 2) if warm.wall_s else None,
                    "cold_x_bare": round(cold.wall_s / bare.wall_s, 2),
                    "warm_x_bare": round(warm.wall_s / bare.wall_s, 2),
                    "same_result": result is not None and result == _result(warm),
                    "exit_codes": [cold.exit_code, warm.exit_code],
                    "first": "cold" if cold_first else "warm",
                }
            )
        answered = _server("status", str(warm_lh))["questions"]
    finally:
        _server("stop", str(warm_lh))
    return {
        "bare_s": round(bare.wall_s, 2),
        "server_start_s": started["start_s"],
        "jobs_run_by_server": answered,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "rows": rows,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"load average {_load(result['load_before'])} at the start, "
        f"{_load(result['load_after'])} at the end (2 cores); bare Spark+Delta session "
        f"{result['bare_s']} s; server start {result['server_start_s']} s; "
        f"{result['jobs_run_by_server']} analyze job(s) run by the server",
        "",
        "| input | records | cold s (CPU s) | warm s | cold / warm | cold × bare | warm × bare "
        "| same result |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in result["rows"]:
        same = "yes" if row["same_result"] else "NO"
        lines.append(
            f"| {Path(row['input']).name} | {row['records'] or 0:,} | {row['cold_s']:.1f} "
            f"({row['cold_cpu_s']:.1f}) | {row['warm_s']:.1f} | {row['ratio']} | "
            f"{row['cold_x_bare']} | {row['warm_x_bare']} | {same} (exit "
            f"{'/'.join(str(c) for c in row['exit_codes'])}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.warm_analyze", description=__doc__)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--inputs", type=lambda t: [Path(p) for p in t.split(",")], help="these folders instead"
    )
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    begun = time.monotonic()
    inputs = [p.resolve() for p in args.inputs] if args.inputs else None
    inputs = inputs or simulated_inputs(workdir, args.messages, args.runs, logs)
    result = measure(workdir, inputs, logs)
    result["bench_s"] = round(time.monotonic() - begun, 1)
    print(render(result))  # noqa: T201
    (workdir / "warm_analyze.json").write_text(json.dumps(result, indent=2))
    failed = [r for r in result["rows"] if not r["same_result"]]
    if result["jobs_run_by_server"] != len(inputs):  # else "warm" was cold too
        print(f"the server ran {result['jobs_run_by_server']} of {len(inputs)} jobs")  # noqa: T201
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
