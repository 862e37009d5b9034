"""Warm answers: each question command answered cold (its own JVM) and warm (through
`pulsar-audit server`), on one lakehouse and run, in the same invocation.

    .venv/bin/python -m bench.warm_answers --lakehouse DIR --run RUN --seq N [--repeat 5]

Per question: the median wall of `--cold-repeat` cold calls (PULSAR_AUDIT_SERVER=off) and of
`--repeat` warm calls (a server this script starts after the cold calls and stops at the
end), their ratio, and whether the warm call printed what the cold one printed (exit code
and stdout). Each call is a whole `pulsar-audit` process, as a person types it. The figures
depend on the machine's load, printed with them: compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import Measured, run_measured

EXE = Path(sys.executable).parent / "pulsar-audit"
GOLD_SQL = "select run_id, topic, sent, lost, valid from gold.run_summary order by run_id"


def questions(run: str, seq: int, report_out: Path) -> dict[str, list[str]]:
    """The question commands, by the name the table prints."""
    return {
        "message": ["message", run, "--seq", str(seq)],
        "explain": ["explain", run],
        "sql (gold)": ["sql", GOLD_SQL],
        "summary": ["summary"],
        "alerts list": ["alerts", "list"],
        "runs": ["runs", "list"],
        "report": ["report", run, "--out", str(report_out)],
    }


def _call(name: str, argv: list[str], lakehouse: str, logs: Path, mode: str) -> Measured:
    command = [str(EXE), *argv, "--lakehouse", lakehouse]
    return run_measured(name, command, logs, Path.cwd(), env={"PULSAR_AUDIT_SERVER": mode})


def _server(action: str, lakehouse: str, *extra: str) -> dict[str, Any]:
    import subprocess

    done = subprocess.run(
        [str(EXE), "server", action, "--lakehouse", lakehouse, "--json", *extra],
        capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(
            f"`server {action}` failed ({done.returncode}): {done.stdout}{done.stderr}"
        )
    return json.loads(done.stdout)


def _known(argv: list[str], lakehouse: str, logs: Path) -> bool:
    """Whether this checkout has the command (`runs list` arrives with issue 28 item 3)."""
    return _call("help", [*argv[:2], "--help"], lakehouse, logs, "off").exit_code == 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    logs = Path(tempfile.mkdtemp(prefix="warm-answers-"))
    asked = questions(args.run, args.seq, logs / "report.html")
    asked = {n: q for n, q in asked.items() if not args.only or n.split()[0] in args.only}
    asked = {n: q for n, q in asked.items() if n != "runs" or _known(q, args.lakehouse, logs)}
    if _server("status", args.lakehouse)["running"]:
        raise SystemExit(f"a server already runs for {args.lakehouse}: stop it first")
    rows: dict[str, dict[str, Any]] = {}
    for name, argv in asked.items():
        cold = [_call(name, argv, args.lakehouse, logs, "off") for _ in range(args.cold_repeat)]
        rows[name] = {"cold": cold}
    started = _server("start", args.lakehouse, "--idle-timeout", "600")
    try:
        for name, argv in asked.items():
            rows[name]["warm"] = [
                _call(name, argv, args.lakehouse, logs, "") for _ in range(args.repeat)
            ]
        answered = _server("status", args.lakehouse)["questions"]
    finally:
        _server("stop", args.lakehouse)
    return {
        "lakehouse": args.lakehouse,
        "run": args.run,
        "server_start_s": started["start_s"],
        "questions_answered_by_server": answered,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "rows": {name: _summary(row) for name, row in rows.items()},
    }


def _summary(row: dict[str, list[Measured]]) -> dict[str, Any]:
    cold, warm = row["cold"], row["warm"]
    cold_s = statistics.median(m.wall_s for m in cold)
    warm_s = statistics.median(m.wall_s for m in warm)
    first = (cold[-1].exit_code, cold[-1].stdout)
    return {
        "cold_s": round(cold_s, 2),
        "warm_s": round(warm_s, 2),
        "warm_runs_s": [round(m.wall_s, 2) for m in warm],
        "ratio": round(cold_s / warm_s, 1),
        "same_output": all((m.exit_code, m.stdout) == first for m in warm),
        "exit_code": cold[-1].exit_code,
    }


def _load(averages: tuple[float, ...]) -> str:
    return "/".join(f"{x:.1f}" for x in averages)


def render(result: dict[str, Any], cold_n: int, warm_n: int) -> str:
    lines = [
        f"lakehouse {result['lakehouse']}, run {result['run']}; load average "
        f"{_load(result['load_before'])} at the start, {_load(result['load_after'])} at the end "
        f"(2 cores); server start "
        f"{result['server_start_s']} s; {result['questions_answered_by_server']} questions "
        "answered by the server",
        "",
        f"| question | cold s (median of {cold_n}) | warm s (median of {warm_n}) | "
        "cold / warm | same output |",
        "|---|---:|---:|---:|---|",
    ]
    for name, row in result["rows"].items():
        lines.append(
            f"| {name} | {row['cold_s']:.2f} | {row['warm_s']:.2f} | {row['ratio']:.1f} | "
            f"{'yes' if row['same_output'] else 'NO'} (exit {row['exit_code']}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.warm_answers", description=__doc__)
    parser.add_argument("--lakehouse", required=True, help="an analyzed local lakehouse")
    parser.add_argument("--run", required=True, help="the run that message/explain/report ask")
    parser.add_argument("--seq", type=int, required=True, help="the seq that message asks")
    parser.add_argument("--repeat", type=int, default=5, help="warm calls per question")
    parser.add_argument("--cold-repeat", type=int, default=1, help="cold calls per question")
    parser.add_argument(
        "--only", type=lambda t: t.split(","), help="these questions only, e.g. message,sql"
    )
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    args.lakehouse = str(Path(args.lakehouse).resolve())
    begun = time.monotonic()
    result = measure(args)
    result["bench_s"] = round(time.monotonic() - begun, 1)
    print(render(result, args.cold_repeat, args.repeat))  # noqa: T201
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    differ = [n for n, r in result["rows"].items() if not r["same_output"]]
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
