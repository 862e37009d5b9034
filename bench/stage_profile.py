"""Where analyze's time goes, from Spark itself: a per-stage table from Spark's event log.

    .venv/bin/python -m bench.stage_profile EVENT_LOG_FILE_OR_DIR LAKEHOUSE [ANALYZE_STDERR]

analyze tags every Spark job with the stage of the job it ran in (`pulsar_audit.spark.
spark_stage`, the local property `pulsar_audit.stage`); with `spark.eventLog.enabled` the
event log holds every job's start, end and properties and every task's metrics. Per stage:
Spark jobs, the jobs' wall time (union of their intervals), executor CPU seconds, records
read and written, bytes written, shuffle bytes, and the Delta commits the stage made
(`place_commits`). With analyze's `-v` stderr, the stage's own wall seconds and when it ran.

The log must be uncompressed JSON lines (`spark.eventLog.compress=false`: Spark 4 compresses
with zstd by default); bench/profiling.py writes a conf folder with the settings needed.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAGE_PROPERTY = "pulsar_audit.stage"
STEP_PROPERTY = "pulsar_audit.step"  # inside a stage: the table a job computes or writes
OUTSIDE = "(outside a stage)"
# a job's `-v` line at a stage's end (jobs/stages.py; analyze's stages were once its own)
STAGE_LINE = re.compile(r"^(\S+ \S+),(\d{3}) INFO jobs\.\w+: stage (.+): ([0-9.]+) s$")
COMPRESSED_SUFFIXES = (".zstd", ".lz4", ".lzf", ".snappy")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
APP_END = "SparkListenerApplicationEnd"
IN_PROGRESS = ".inprogress"  # the suffix of a log Spark is still writing


@dataclass
class StageFigures:
    jobs: int = 0
    intervals: list[tuple[int, int]] = field(default_factory=list)
    cpu_ns: int = 0
    records_read: int = 0
    records_written: int = 0
    bytes_written: int = 0
    shuffle_bytes: int = 0
    commits: int = 0
    wall_s: float | None = None
    ran: tuple[int, int] | None = None  # epoch ms, from analyze's -v log

    @property
    def jobs_s(self) -> float:
        """Seconds in which at least one of the stage's jobs ran (overlaps counted once)."""
        total, end = 0, 0
        for start, stop in sorted(self.intervals):
            total += max(0, stop - max(start, end))
            end = max(end, stop)
        return total / 1000

    def row(self, stage: str) -> dict[str, Any]:
        return {
            "stage": stage,
            "wall_s": self.wall_s,
            "spark_jobs": self.jobs,
            "jobs_s": round(self.jobs_s, 1),
            "cpu_s": round(self.cpu_ns / 1e9, 1),
            "records_read": self.records_read,
            "records_written": self.records_written,
            "mb_written": round(self.bytes_written / 2**20, 1),
            "shuffle_mb": round(self.shuffle_bytes / 2**20, 1),
            "delta_commits": self.commits,
        }


@dataclass
class Execution:
    """A root SQL execution: one command (a Delta write, its commit inside), and the stage of
    its Spark jobs (None: it ran none)."""

    start: int
    plan: str
    end: int = 2**62
    stage: str | None = None


@dataclass
class Job:
    """One Spark job: the stage it ran in, when it was submitted and ended (epoch ms), the
    executor CPU of its tasks."""

    stage: str
    start: int
    end: int | None = None
    cpu_ns: int = 0


@dataclass
class EventLog:
    stages: dict[str, StageFigures]
    executions: dict[int, Execution]
    window: tuple[int, int] | None  # the application's start and end, epoch ms
    # (stage, step) → the figures of the jobs tagged with that step (pulsar_audit.spark_step)
    steps: dict[tuple[str, str], StageFigures] = field(default_factory=dict)
    jobs: dict[int, Job] = field(default_factory=dict)  # by Spark's job id


def _refuse_compressed(path: Path) -> None:
    with open(path, "rb") as head:
        magic = head.read(4)
    if path.name.endswith(COMPRESSED_SUFFIXES) or magic == ZSTD_MAGIC:
        raise ValueError(
            f"{path}: a compressed Spark event log; expected uncompressed JSON lines. "
            "Run Spark with spark.eventLog.compress=false (and "
            "spark.eventLog.rolling.enabled=false for one file): bench/run.py --profile does."
        )


def read_events(path: Path) -> EventLog:
    """Per stage, the figures of the jobs the event log at `path` tags with it; the root SQL
    executions; the application's start and end, when the log holds them."""
    _refuse_compressed(path)
    stages: dict[str, StageFigures] = defaultdict(StageFigures)
    executions: dict[int, Execution] = {}
    app: dict[str, int] = {}
    started: dict[int, tuple[str, int]] = {}  # job id → its stage name and submission time
    spark_stage_of: dict[int, str] = {}  # Spark's stage id → our stage name
    steps: dict[tuple[str, str], StageFigures] = defaultdict(StageFigures)
    step_of: dict[int, tuple[str, str]] = {}  # Spark's stage id → (our stage, its step)
    step_started: dict[int, tuple[str, str]] = {}  # job id → (our stage, its step)
    jobs: dict[int, Job] = {}
    job_of: dict[int, int] = {}  # Spark's stage id → its job's id
    with open(path, encoding="utf-8") as events:
        for line in filter(str.strip, events):
            event = json.loads(line)
            kind = event.get("Event") or ""
            if kind == "SparkListenerJobStart":
                properties = event.get("Properties") or {}
                name = properties.get(STAGE_PROPERTY) or OUTSIDE
                root = properties.get("spark.sql.execution.root.id")
                if root is not None and int(root) in executions:
                    executions[int(root)].stage = name
                started[event["Job ID"]] = name, event["Submission Time"]
                jobs[event["Job ID"]] = Job(name, event["Submission Time"])
                step = properties.get(STEP_PROPERTY)
                for stage_id in event.get("Stage IDs", []):
                    spark_stage_of[stage_id] = name
                    job_of[stage_id] = event["Job ID"]
                    if step:
                        step_of[stage_id] = (name, step)
                stages[name].jobs += 1
                if step:
                    steps[name, step].jobs += 1
                    step_started[event["Job ID"]] = (name, step)
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in started:
                name, at = started[event["Job ID"]]
                stages[name].intervals.append((at, event["Completion Time"]))
                jobs[event["Job ID"]].end = event["Completion Time"]
                if event["Job ID"] in step_started:
                    steps[step_started[event["Job ID"]]].intervals.append(
                        (at, event["Completion Time"])
                    )
            elif kind == "SparkListenerTaskEnd":
                _add_task(stages[spark_stage_of.get(event["Stage ID"], OUTSIDE)], event)
                if event["Stage ID"] in job_of:
                    job = jobs[job_of[event["Stage ID"]]]
                    job.cpu_ns += (event.get("Task Metrics") or {}).get("Executor CPU Time", 0)
                if event["Stage ID"] in step_of:
                    _add_task(steps[step_of[event["Stage ID"]]], event)
            elif kind.endswith("SQLExecutionStart"):
                if event.get("rootExecutionId", event["executionId"]) == event["executionId"]:
                    plan = event.get("physicalPlanDescription", "")
                    executions[event["executionId"]] = Execution(event["time"], plan)
            elif kind.endswith("SQLExecutionEnd") and event["executionId"] in executions:
                executions[event["executionId"]].end = event["time"]
            elif kind in ("SparkListenerApplicationStart", APP_END):
                app[kind] = event["Timestamp"]
    window = (app.get("SparkListenerApplicationStart", 0), app.get(APP_END, 2**62))
    return EventLog(stages, executions, window if app else None, dict(steps), jobs)


def _add_task(figures: StageFigures, event: dict[str, Any]) -> None:
    metrics = event.get("Task Metrics") or {}
    figures.cpu_ns += metrics.get("Executor CPU Time", 0)
    figures.records_read += (metrics.get("Input Metrics") or {}).get("Records Read", 0)
    output = metrics.get("Output Metrics") or {}
    figures.records_written += output.get("Records Written", 0)
    figures.bytes_written += output.get("Bytes Written", 0)
    shuffle = metrics.get("Shuffle Write Metrics") or {}
    figures.shuffle_bytes += shuffle.get("Shuffle Bytes Written", 0)


def commits(lakehouse: Path, window: tuple[int, int] | None = None) -> list[tuple[str, int]]:
    """(table path, commitInfo timestamp in epoch ms) of every Delta commit under `lakehouse`
    (only those inside `window`, the application's start and end, when given)."""
    found = []
    for commit in lakehouse.absolute().glob("**/_delta_log/*.json"):
        with open(commit, encoding="utf-8") as actions:
            for line in actions:
                info = json.loads(line).get("commitInfo")
                if info and "timestamp" in info:
                    found.append((str(commit.parent.parent), int(info["timestamp"])))
                    break
    return [(t, at) for t, at in found if window is None or window[0] <= at <= window[1]]


def place_commits(log: EventLog, made: list[tuple[str, int]]) -> None:
    """Count each commit in the stage that made it: the stage of the root SQL execution that
    writes its table (its plan's `path=TABLE` or MERGE target `Delta[version=N, file:TABLE]`)
    and was running at the commit (stages run side by side, so time alone cannot say); a
    commit no Spark command made (a new table's first) in the stage running then by analyze's
    -v log (the one ending first: its end is exact); else OUTSIDE."""
    for table, at in made:
        target = rf"(?:path=|Delta\[version=\d+, (?:file:)?){re.escape(table)}[\],)\s]"
        names_table = re.compile(target)
        writers = [
            x
            for x in log.executions.values()
            if x.stage and x.start <= at <= x.end and names_table.search(x.plan)
        ]
        running = [
            (f.ran[1], n) for n, f in log.stages.items() if f.ran and f.ran[0] <= at <= f.ran[1]
        ]
        if writers:
            owner = min(writers, key=lambda x: x.end).stage or OUTSIDE
        else:
            owner = min(running)[1] if running else OUTSIDE
        log.stages[owner].commits += 1


def stage_runs(stderr: Path) -> list[tuple[str, float, tuple[int, int]]]:
    """(name, wall seconds, (start, end) in epoch ms) of each stage a job's `-v` log shows,
    in the order they ended, from its `stage NAME: S s` line (logged at its end, in local
    time)."""
    runs = []
    for line in stderr.read_text(encoding="utf-8", errors="replace").splitlines():
        match = STAGE_LINE.match(line)
        if match:
            stamp, ms, name, wall = match.groups()
            end = int(time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))) * 1000 + int(ms)
            # the wall is rounded to 0.1 s: start up to 50 ms earlier
            runs.append((name, float(wall), (end - int(float(wall) * 1000) - 50, end)))
    return runs


def read_stage_walls(stderr: Path, stages: dict[str, StageFigures]) -> None:
    """Each stage's wall seconds and when it ran (`stage_runs`; a stage run twice: its last)."""
    for name, wall, ran in stage_runs(stderr):
        stages[name].wall_s = wall
        stages[name].ran = ran


def profile(event_log: Path, lakehouse: Path, stderr: Path | None = None) -> list[dict]:
    """The per-stage rows, in the order the stages started."""
    log = read_events(event_log)
    if stderr is not None:
        read_stage_walls(stderr, log.stages)
    place_commits(log, commits(lakehouse, log.window))
    stages = log.stages
    order = sorted(
        stages, key=lambda n: (stages[n].ran or min(stages[n].intervals or [(2**62,)]))[0]
    )
    return [stages[name].row(name) for name in order]


def step_profile(event_log: Path) -> list[dict]:
    """Per (stage, step) — the table a job of the stage computes or writes — its jobs' figures,
    in the order the steps started; empty when no job carries a step."""
    steps = read_events(event_log).steps
    order = sorted(steps, key=lambda key: min(steps[key].intervals or [(2**62,)])[0])
    return [{**steps[stage, step].row(step), "stage": stage, "step": step} for stage, step in order]


def step_markdown(rows: list[dict]) -> str:
    """The step rows as a Markdown table (steps of one stage can overlap: no sums)."""
    lines = [
        "| stage | step | Spark jobs | jobs s | executor CPU s | rows read | shuffle MB |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['stage']} | {r['step']} | {r['spark_jobs']} | {r['jobs_s']:.1f} "
            f"| {r['cpu_s']:.1f} | {r['records_read']:,} | {r['shuffle_mb']:.1f} |"
        )
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table, and an `all` row of their sums (stages that ran side by
    side make the summed wall s and jobs s exceed the process's wall)."""
    lines = [
        "| stage | wall s | Spark jobs | jobs s | executor CPU s | rows read | rows written "
        "| MB written | shuffle MB | Delta commits |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total = {k: sum(r[k] or 0 for r in rows) for k in rows[0] if k != "stage"} if rows else {}
    for r in [*rows, {**total, "stage": "all"}] if rows else []:
        wall = "" if r["wall_s"] is None else f"{r['wall_s']:.1f}"
        lines.append(
            f"| {r['stage']} | {wall} | {r['spark_jobs']} | {r['jobs_s']:.1f} | {r['cpu_s']:.1f} "
            f"| {r['records_read']:,} | {r['records_written']:,} | {r['mb_written']:.1f} "
            f"| {r['shuffle_mb']:.1f} | {r['delta_commits']} |"
        )
    return "\n".join(lines)


def event_log_file(directory: Path, settle_s: float = 30.0) -> Path:
    """The one event log Spark wrote into `directory` (a file, or Spark 4's rolling folder
    `eventlog_v2_*` holding one `events_*` file while no rolling size is reached).

    A job's process can exit while its driver JVM is still stopping: the log is then still
    `….inprogress` and renamed a moment later. Waits up to `settle_s` for the final name, then
    takes the file under whichever name it has.
    """
    deadline = time.monotonic() + settle_s
    while True:
        found = [p for p in directory.iterdir() if not p.name.startswith(".")]
        if len(found) == 1 and found[0].is_dir():
            found = sorted(p for p in found[0].iterdir() if p.name.startswith("events_"))
        if len(found) != 1:
            raise ValueError(f"{directory}: expected one Spark event log, found {len(found)}")
        if not found[0].name.endswith(IN_PROGRESS) or time.monotonic() >= deadline:
            return found[0]
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        raise SystemExit(__doc__)
    log = Path(args[0])
    try:
        log = event_log_file(log) if log.is_dir() else log
        print(markdown(profile(log, Path(args[1]), Path(args[2]) if len(args) == 3 else None)))
        steps = step_profile(log)
        if steps:
            print("\n" + step_markdown(steps))
    except ValueError as exc:  # a compressed or missing log: say what to do, no traceback
        raise SystemExit(str(exc)) from None


if __name__ == "__main__":
    main()
