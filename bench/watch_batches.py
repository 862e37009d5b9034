"""What one `watch` micro-batch costs, beside a cold `analyze` of the same trace, in one command.

    .venv/bin/python -m bench.watch_batches --messages 1e4 --chunks 3 [--workdir DIR]
        [--trace DIR] [--baseline CHECKOUT]

The benchmark's simulated trace (bench/simulated.py) is cut by trace time into CHUNKS files,
each holding every client's events of its stretch, written into a landing folder. Then, one
after the other, each as a whole process: `pulsar-audit watch LANDING --once --max-files 1 -v`
(one micro-batch per chunk; the seconds of each come from its `stage micro-batch N` log line)
and `pulsar-audit analyze` of the whole trace into a new lakehouse (the reference). Prints each
micro-batch's seconds and its ratio to the analyze's wall. Figures depend on the machine's load:
the ratio, measured in the same command, is what to compare.

--trace: a simulated trace written before (same --messages; the simulation takes minutes).
--baseline: another checkout of pulsar-audit (e.g. `git archive` of an earlier commit, with
this one's .cache linked in) whose `watch` runs first on the same landing folder, into its
own lakehouse: before and after, beside the same analyze, in one command. Given several
times (baseline, baseline2, ...: e.g. the commits between two changes), each watches in turn,
so that each change's effect is measured in the same command.
--profile: each watch writes Spark's event log (bench/profiling.py), and its micro-batches'
Spark jobs, their seconds and executor CPU per stage are printed (bench/watch_profile.py).
--rounds N: every checkout watches N times, interleaved (round 1: each baseline, then this
checkout; round 2: the same again; ...), each into a lakehouse of its own; a table then sums
each watch's micro-batches after the first (and their live state and ingest stages) per
round. A single micro-batch here varies by about 2 s from run to run, more than most changes
save: compare the sums, round by round.
--sites: after the timed watches, this checkout watches once more through bench/job_sites.py
(every Spark job tagged with the line of pulsar-audit that caused it; slower, so not timed
beside the others), and a table sums the jobs of its micro-batches after the first per call
site: where the jobs come from, for the next cut.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.job_sites import markdown as sites_markdown
from bench.job_sites import site_table
from bench.profiling import profiling_conf_dir
from bench.simulated import main as simulate
from bench.stage_profile import event_log_file
from bench.watch_profile import batch_profile, markdown
from pulsar_audit.config import CONF_DIR_VAR, DEFAULT_ENV, default_conf_dir

CLI = [sys.executable, "-m", "jobs.cli"]
TIMED_STAGE_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*?stage (.+?): ([\d.]+) s$", re.MULTILINE
)
LEAVING = "analyze"  # the watch's leaving stage
AFTER = "after it"  # the time between a micro-batch and the next (`micro_batches`)
BATCH_STAGE = re.compile(r"micro-batch (\d+): \d+ file\(s\)")


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


def timed(
    command: list[str], log: Path, code: str | None = None, extra_env: dict[str, str] | None = None
) -> tuple[float, str]:
    """Run `command` (with the checkout `code` first on the path, when given: `python -m`
    puts the working folder first, so it runs there too)."""
    env = {**os.environ, **(extra_env or {})}
    if code:
        env["PYTHONPATH"] = os.pathsep.join([code, *filter(None, [env.get("PYTHONPATH")])])
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env=env, cwd=code or None
    )
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): see {log}")
    return time.monotonic() - started, done.stdout + done.stderr


Batch = tuple[int, float, dict[str, float]]


def micro_batches(log: str) -> list[Batch]:
    """(number, seconds, {stage: seconds} of the stages inside it) of each micro-batch: a
    stage is logged when it ends, so those logged before a micro-batch's own line are its.
    Beside them, AFTER: from the micro-batch's end to the start of the next micro-batch or of
    the leaving `analyze` (the live view the watch shows after each micro-batch, and the
    stream's start of the next), when the log holds that next stage."""
    found: list[Batch] = []
    inside: dict[str, float] = {}
    ended_at: float | None = None  # when the last micro-batch ended (epoch s)
    for stamp, ms, name, seconds in TIMED_STAGE_LINE.findall(log):
        at = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000
        batch = BATCH_STAGE.fullmatch(name)
        if found and ended_at is not None and (batch or name == LEAVING):
            found[-1][2][AFTER] = round(at - float(seconds) - ended_at, 1)
            ended_at = None
        if batch:
            found.append((int(batch.group(1)), float(seconds), inside))
            inside, ended_at = {}, at
        else:
            inside[name] = inside.get(name, 0.0) + float(seconds)
    return found


def watched(
    work: Path, name: str, code: str | None, profile: bool = False, sites: bool = False
) -> tuple[float, list[Batch]]:
    """`watch --once` of the landing folder by the checkout `code` (None: this one); with
    `profile`, Spark's event log into work/events-NAME; with `sites` (this checkout only),
    run through bench/job_sites.py, every job tagged with its Python call site."""
    cli = [sys.executable, "-m", "bench.job_sites"] if sites else CLI
    watch = [*cli, "watch", str(work / "landing"), "--once", "--max-files", "1", "-v"]
    watch += ["--lakehouse", str(work / f"lh-{name}")]
    env = {}
    if profile or sites:
        conf = Path(code) / "conf" if code else default_conf_dir()
        events = work / f"events-{name}"
        conf = profiling_conf_dir(conf, work / f"conf-{name}", DEFAULT_ENV, events)
        env[CONF_DIR_VAR] = str(conf)
    # which checkout the process really runs (the baseline once ran this one by mistake)
    which = [sys.executable, "-c", "import jobs; print(jobs.__file__)"]
    print(f"{name} runs {timed(which, work / f'{name}-which.log', code)[1] or '?'}".strip())
    wall, log = timed(watch, work / f"{name}.log", code, env)
    return wall, micro_batches(log)


SUMMED_STAGES = ("live state", "ingest traces", AFTER)


def round_sums(batches: list[Batch]) -> dict[str, float]:
    """The seconds of a watch's micro-batches after the first (the first pays the JVM's
    warming), and of SUMMED_STAGES inside them; in tenths, as the log gives them."""
    later = [b for b in batches if b[0] > 0]
    sums = {"micro-batches": sum(seconds for _, seconds, _ in later)}
    for stage in SUMMED_STAGES:
        sums[stage] = sum(stages.get(stage, 0.0) for _, _, stages in later)
    return {key: round(value, 1) for key, value in sums.items()}


def rounds_table(results: list[tuple[str, int, list[Batch]]]) -> str:
    """A markdown table: per checkout and round (in the order they ran), `round_sums`."""
    lines = [
        "| checkout | round | micro-batches | micro-batches after the first s | "
        + " | ".join(f"{stage} s" for stage in SUMMED_STAGES)
        + " |",
        "|---|---:|---:|---:|" + "---:|" * len(SUMMED_STAGES),
    ]
    for name, number, batches in results:
        sums = round_sums(batches)
        cells = [f"{sums[key]:.1f}" for key in ("micro-batches", *SUMMED_STAGES)]
        lines.append(f"| {name} | {number} | {len(batches)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=float, default=1e4)
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--workdir", default="/tmp/pulsar-audit-bench-watch")
    parser.add_argument("--trace", help="a simulated trace of --messages written before")
    parser.add_argument(
        "--baseline", metavar="CHECKOUT", action="append", help="also watch with this checkout"
    )
    parser.add_argument("--profile", action="store_true", help="Spark jobs per stage")
    parser.add_argument(
        "--sites",
        action="store_true",
        help="this checkout's watch run again, its Spark jobs per Python call site (see above)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="watches per checkout, interleaved (see above)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    trace = work / "trace"
    if args.trace:
        shutil.copytree(args.trace, trace)
    else:
        simulate(["--messages", str(args.messages), "--seed", "1", "--out", str(trace)])
    sizes = cut_into_chunks(trace, work / "landing", args.chunks)
    print(f"{int(args.messages):,} messages: {len(sizes)} chunks of {sizes} events")

    watches = [
        (f"baseline{n if n > 1 else ''}", code)
        for n, code in enumerate(args.baseline or [], start=1)
    ]
    runs = [
        (name, number, f"{name}-r{number}" if args.rounds > 1 else name, code)
        for number in range(1, args.rounds + 1)
        for name, code in [*watches, ("watch", None)]
    ]
    results = [
        (name, number, run, *watched(work, run, code, args.profile))
        for name, number, run, code in runs
    ]
    if args.sites:  # slower, tagged: a watch of its own, after the timed ones
        watched(work, "sites", None, sites=True)
    analyze = [*CLI, "analyze", str(trace), "--json", "--lakehouse", str(work / "lh-analyze")]
    analyze_wall, _ = timed(analyze, work / "analyze.log")

    print(f"analyze (cold process, whole trace): {analyze_wall:.1f} s")
    checkouts = dict(watches)
    for name, _, run, wall, batches in results:
        code = checkouts.get(name, "this checkout")
        print(
            f"{run} ({code}; cold process, {len(batches)} micro-batches and the final "
            f"analyze): {wall:.1f} s"
        )
        for number, seconds, stages in batches:
            ratio = seconds / analyze_wall
            inside = ", ".join(f"{stage} {s:.1f}" for stage, s in stages.items())
            print(f"  micro-batch {number}: {seconds:.1f} s = {ratio:.2f} x analyze ({inside})")
        if args.profile:
            events = event_log_file(work / f"events-{run}")
            print(f"\nSpark jobs of {run}, per micro-batch and stage (event log):")
            print(markdown(batch_profile(events, work / f"{run}.log")) + "\n")
    if args.sites:
        events = event_log_file(work / "events-sites")
        print("\nSpark jobs of micro-batches after the first, per Python call site (a watch of")
        print("its own through bench/job_sites.py; its seconds are slower than the others'):")
        print(sites_markdown(site_table(events, work / "sites.log")))
    if args.rounds > 1:
        print("\nEach watch's micro-batches after the first, summed, round by round:")
        print(rounds_table([(name, number, batches) for name, number, _, _, batches in results]))


if __name__ == "__main__":
    main()
