"""Which line of pulsar-audit submits each Spark job: the CLI run with every job tagged with
its Python call site, and a table of a watch's jobs per site.

    .venv/bin/python -m bench.job_sites watch LANDING --once -v ...   (any CLI arguments)
    .venv/bin/python -m bench.job_sites --table EVENT_LOG_FILE_OR_DIR WATCH_STDERR

Spark's event log names a PySpark job's call site only for the RDD actions PySpark wraps
(`collect`), not for a checkpoint, a Delta write or a commit: most of a watch's jobs say "?".
Run through this module, every call from Python into the JVM first sets the local property
SITE_PROPERTY to the innermost frames of this repository's code on the Python stack (when it
changed since the thread's last call), so a job carries the line that caused it in its
properties. The extra call per change makes the run slower (about 2–3 times, here): the jobs
and their sites are what it is for, not the seconds. `--table` (and `bench.watch_batches
--sites`) sums the jobs of the micro-batches after the first by site, from the event log of
a watch run so (bench/profiling.py's settings) and its `-v` log.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from bench.stage_profile import event_log_file, stage_runs
from bench.watch_profile import BATCH_STAGE

SITE_PROPERTY = "pulsar_audit.site"
REPO = Path(__file__).resolve().parent.parent
FRAMES = 3  # innermost frames of the repository's code named per job
UNKNOWN = "?"


def site(frame, root: str = f"{REPO}/", frames: int = FRAMES) -> str:
    """The innermost `frames` frames of the repository's own code (not its .venv) from
    `frame` outwards, as `path:line:function < ...`; UNKNOWN when none."""
    chain: list[str] = []
    while frame is not None and len(chain) < frames:
        name = frame.f_code.co_filename
        if name.startswith(root) and "/.venv/" not in name:
            chain.append(f"{name[len(root) :]}:{frame.f_lineno}:{frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(chain) or UNKNOWN


def install() -> Callable[[], None]:
    """Tag every Spark job this process submits from now on with its call site; returns what
    puts py4j back as it was."""
    import py4j.java_gateway as gateway
    from pyspark import SparkContext

    original = gateway.JavaMember.__call__
    local = threading.local()

    def call(member, *args):
        if getattr(local, "busy", False):
            return original(member, *args)
        where = site(sys._getframe(1))
        context = SparkContext._active_spark_context
        jsc = getattr(context, "_jsc", None) if context is not None else None
        if jsc is not None and where != getattr(local, "last", None):
            local.busy = True
            try:
                jsc.setLocalProperty(SITE_PROPERTY, where)
                local.last = where
            finally:
                local.busy = False
        return original(member, *args)

    gateway.JavaMember.__call__ = call

    def uninstall() -> None:
        gateway.JavaMember.__call__ = original

    return uninstall


def site_table(event_log: Path, stderr: Path) -> list[dict]:
    """Per call site, over the micro-batches after the first (the first pays the JVM's
    warming): Spark jobs and their seconds per micro-batch, most seconds first."""
    windows = []
    for name, _, ran in stage_runs(stderr):
        batch = BATCH_STAGE.fullmatch(name)
        if batch and int(batch.group(1)) > 0:
            windows.append(ran)
    started: dict[int, tuple[int, str]] = {}
    jobs: dict[str, list[float]] = defaultdict(list)
    with open(event_log, encoding="utf-8") as events:
        for line in filter(str.strip, events):
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                properties = event.get("Properties") or {}
                at = event["Submission Time"]
                if any(start <= at <= end for start, end in windows):
                    started[event["Job ID"]] = at, properties.get(SITE_PROPERTY) or UNKNOWN
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in started:
                at, where = started.pop(event["Job ID"])
                jobs[where].append((event["Completion Time"] - at) / 1000)
    count = max(len(windows), 1)
    rows = [
        {
            "site": where,
            "jobs_per_batch": round(len(seconds) / count, 1),
            "seconds_per_batch": round(sum(seconds) / count, 2),
        }
        for where, seconds in jobs.items()
    ]
    return sorted(rows, key=lambda r: (-r["seconds_per_batch"], r["site"]))


def markdown(rows: list[dict]) -> str:
    lines = ["| Spark jobs per micro-batch | their s | call site |", "|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['jobs_per_batch']:.1f} | {r['seconds_per_batch']:.2f} | {r['site']} |")
    total = sum(r["jobs_per_batch"] for r in rows), sum(r["seconds_per_batch"] for r in rows)
    lines.append(f"| {total[0]:.1f} | {total[1]:.2f} | (all) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--table"]:
        if len(args) != 3:
            raise SystemExit(__doc__)
        log = Path(args[1])
        try:
            log = event_log_file(log) if log.is_dir() else log
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
        print(markdown(site_table(log, Path(args[2]))))
        return 0
    install()
    from jobs.cli import main as cli

    return cli(args)


if __name__ == "__main__":
    sys.exit(main())
