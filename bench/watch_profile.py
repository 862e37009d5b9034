"""Where each `watch` micro-batch's time goes, from Spark itself: per micro-batch and stage.

    .venv/bin/python -m bench.watch_profile EVENT_LOG_FILE_OR_DIR WATCH_STDERR

A watch's stages repeat in every micro-batch (`ingest traces`, `live state`, `commit`, …), so
bench/stage_profile.py's per-stage sums mix them. Here each Spark job (tagged with its stage,
pulsar_audit.spark.spark_stage) goes to the micro-batch whose `stage micro-batch N` run (from
the watch's `-v` log) holds its submission, and the leaving `analyze` is a window of its own.
Per (window, stage): the stage's wall seconds from the log, its Spark jobs, the seconds in
which one of them ran (overlaps counted once), their executor CPU seconds. The event log is
written with bench/profiling.py's settings (bench/watch_batches.py --profile does).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from bench.stage_profile import StageFigures, event_log_file, read_events, stage_runs

BATCH_STAGE = re.compile(r"micro-batch (\d+): \d+ file\(s\)")
LEAVING = "analyze"  # the watch's leaving stage: every stage after the last micro-batch
WHOLE = "(whole)"  # the window's own row: its wall, and every job inside it


def _window_of(windows: list[tuple[str, tuple[int, int]]], at: int) -> str | None:
    for name, (start, end) in windows:
        if start <= at <= end:
            return name
    return None


def batch_profile(event_log: Path, stderr: Path) -> list[dict]:
    """Rows (window, stage, wall_s, spark_jobs, jobs_s, cpu_s), windows in the order they
    ran, each window's WHOLE row first, then its stages in the order they started."""
    runs = stage_runs(stderr)
    windows = []
    for name, _, ran in runs:
        batch = BATCH_STAGE.fullmatch(name)
        if batch or name == LEAVING:
            windows.append((f"micro-batch {batch.group(1)}" if batch else LEAVING, ran))
    figures: dict[tuple[str, str], StageFigures] = defaultdict(StageFigures)
    for name, wall, (start, end) in runs:
        window = _window_of(windows, end)
        if window is not None:
            own = BATCH_STAGE.fullmatch(name) or name == LEAVING
            key = (window, WHOLE if own else name)
            figures[key].wall_s = (figures[key].wall_s or 0.0) + wall
            figures[key].ran = min(figures[key].ran or (start, end), (start, end))
    for job in read_events(event_log).jobs.values():
        window = _window_of(windows, job.start)
        if window is None:
            continue
        for key in {(window, WHOLE), (window, _stage_of(job.stage))}:
            figures[key].jobs += 1
            figures[key].intervals.append((job.start, job.end or job.start))
            figures[key].cpu_ns += job.cpu_ns
    order = {name: number for number, (name, _) in enumerate(windows)}

    def started(key: tuple[str, str]) -> tuple[int, int, int]:
        f = figures[key]
        first = (f.ran or min(f.intervals or [(2**62,)]))[0]
        return order[key[0]], key[1] != WHOLE, first

    return [
        {
            "window": window,
            "stage": stage,
            "wall_s": figures[window, stage].wall_s,
            "spark_jobs": figures[window, stage].jobs,
            "jobs_s": round(figures[window, stage].jobs_s, 1),
            "cpu_s": round(figures[window, stage].cpu_ns / 1e9, 1),
        }
        for window, stage in sorted(figures, key=started)
    ]


def _stage_of(tag: str) -> str:
    """A job tagged with its micro-batch's own stage ran outside the stages inside it."""
    return "(in no inner stage)" if BATCH_STAGE.fullmatch(tag) or tag == LEAVING else tag


def markdown(rows: list[dict]) -> str:
    lines = [
        "| micro-batch | stage | wall s | Spark jobs | jobs s | executor CPU s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        wall = "" if r["wall_s"] is None else f"{r['wall_s']:.1f}"
        stage = "**all**" if r["stage"] == WHOLE else r["stage"]
        lines.append(
            f"| {r['window']} | {stage} | {wall} | {r['spark_jobs']} | {r['jobs_s']:.1f} "
            f"| {r['cpu_s']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit(__doc__)
    log = Path(args[0])
    try:
        log = event_log_file(log) if log.is_dir() else log
        print(markdown(batch_profile(log, Path(args[1]))))
    except ValueError as exc:  # a compressed or missing log: say what to do, no traceback
        raise SystemExit(str(exc)) from None


if __name__ == "__main__":
    main()
