"""Run the long reliability suites and write their figures into docs/reliability.md.

    .venv/bin/python scripts/reliability.py [--kill-points 24] [--fuzz-inputs 100000]
                                            [--pairs 5] [--only crash|fuzz|concurrency|secrets]
                                            [--short]

Runs `pytest tests/reliability` with PULSAR_AUDIT_RELIABILITY=long (the long crash, fuzz and
concurrency suites, plus the default secrets scan), collects the figures each suite records,
and replaces the table between the markers in docs/reliability.md with them, the CPU seconds
spent and the machine's load while they ran (other jobs share the machine: wall time is
meaningless there). With --short the suites run at their default (`make test`) size and
record what those record (the fuzz inputs, the concurrent pair, the secrets scan).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
FIGURES = ROOT / "docs" / "reliability-figures.json"  # the last figures of every suite
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
SUITES = {
    "crash": "test_crash_rerun.py",
    "fuzz": "test_fuzz_parsers.py",
    "concurrency": "test_concurrent_jobs.py",
    "secrets": "test_secrets.py",
}


def run_suites(args: argparse.Namespace, figures: Path) -> tuple[int, float, tuple[float, ...]]:
    """pytest over the chosen suites; (exit code, CPU seconds of pytest and its children)."""
    chosen = [args.only] if args.only else list(SUITES)
    env = {
        **os.environ,
        "PULSAR_AUDIT_RELIABILITY": "short" if args.short else "long",
        "PULSAR_AUDIT_FIGURES": str(figures),
        "PULSAR_AUDIT_KILL_POINTS": str(args.kill_points),
        "PULSAR_AUDIT_FUZZ_INPUTS": str(args.fuzz_inputs),
        "PULSAR_AUDIT_CONCURRENT_PAIRS": str(args.pairs),
    }
    paths = [str(ROOT / "tests" / "reliability" / SUITES[s]) for s in chosen]
    cmd = [sys.executable, "-m", "pytest", *paths, "-q", "--durations=0", "-p", "no:cacheprovider"]
    load_before = os.getloadavg()
    code = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_after = os.getloadavg()
    return code, usage.ru_utime + usage.ru_stime, (*load_before, *load_after)


def table(figures: dict) -> str:
    crash = figures.get("crash", {})
    concurrency = figures.get("concurrency", {})
    secrets = figures.get("secrets", {})
    rows = [
        ("suite", "tried", "result"),
        (
            "crash anywhere, rerun (kill points)",
            f"{crash.get('kill_points_tried', '—')} of "
            f"{crash.get('points_passed_by_a_clean_run', '—')} points a clean run passes"
            + (f" ({crash['mode']})" if crash.get("mode") else ""),
            f"{crash.get('identical', '—')} identical to the clean run",
        ),
    ]
    for name, fuzz in sorted((k, v) for k, v in figures.items() if k.startswith("fuzz:")):
        rows.append(
            (
                f"fuzzing: {name.removeprefix('fuzz:')}",
                f"{fuzz['tried']:,} inputs ({fuzz['distinct']:,} distinct)",
                f"{fuzz['crashes']} crashes"
                + (f", {fuzz['quarantined']:,} quarantined" if "quarantined" in fuzz else "")
                + (f", {fuzz['parse_errors']:,} parse errors" if "parse_errors" in fuzz else "")
                + (f", {fuzz['undecoded']:,} undecoded" if "undecoded" in fuzz else ""),
            )
        )
    rows.append(
        (
            "two jobs at once (pairs)",
            f"{concurrency.get('pairs', '—')} pairs",
            f"{concurrency.get('duplicate_rows', '—')} duplicate rows, "
            f"{concurrency.get('identical_to_a_clean_run', '—')} identical to a clean run, "
            f"{concurrency.get('retried_after_a_clear_conflict_error', '—')} retried after "
            "a conflict error",
        )
    )
    rows.append(
        (
            "secrets scan",
            f"{secrets.get('secrets', '—')} secrets in {secrets.get('places', '—')} files, "
            "outputs and logs",
            f"{secrets.get('hits', '—')} hits",
        )
    )
    lines = [
        "| " + " | ".join(rows[0]) + " |",
        "|---|---|---|",
        *["| " + " | ".join(r) + " |" for r in rows[1:]],
    ]
    lines.append("")
    for run in figures.get("measured", []):
        lines.append(
            f"- {', '.join(run['suites'])}: `{run['command']}`, finished {run['when']}, commit "
            f"{run['commit']}, {run['machine']}; pytest exit {run['exit']}, "
            f"{run['cpu_s']:,.0f} CPU seconds, {run['wall_s']:,.0f} s wall; `uptime` load "
            f"averages {run['load_before']} before, {run['load_after']} after (the machine "
            "was shared with other jobs)."
        )
    if crash.get("points"):
        lines += ["", "Kill points: " + ", ".join(f"`{p}`" for p in crash["points"]) + "."]
    return "\n".join(lines)


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    DOC.write_text(doc[:start] + "\n" + text + "\n" + doc[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kill-points", type=int, default=24)
    parser.add_argument("--fuzz-inputs", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--only", choices=sorted(SUITES))
    parser.add_argument("--short", action="store_true", help="the default (make test) sizes")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures_path = Path(tmp) / "figures.json"
        if args.only and FIGURES.exists():  # keep the other suites' last figures
            figures_path.write_text(FIGURES.read_text())
        started = time.monotonic()
        code, cpu_s, load = run_suites(args, figures_path)
        wall_s = time.monotonic() - started
        figures = json.loads(figures_path.read_text()) if figures_path.exists() else {}
    chosen = [args.only] if args.only else list(SUITES)
    run = {
        "suites": chosen,
        "command": " ".join(
            [".venv/bin/python", "scripts/reliability.py", *(argv or sys.argv[1:])]
        ),
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "exit": code,
        "cpu_s": cpu_s,
        "wall_s": wall_s,
        "load_before": ", ".join(f"{x:.2f}" for x in load[:3]),
        "load_after": ", ".join(f"{x:.2f}" for x in load[3:]),
    }
    earlier = [m for m in figures.get("measured", []) if not set(m["suites"]) & set(chosen)]
    figures["measured"] = [*earlier, run]
    FIGURES.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    write_doc(table(figures))
    print(table(figures))  # noqa: T201
    return code


if __name__ == "__main__":
    sys.exit(main())
