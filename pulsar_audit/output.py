"""How commands print: an aligned text table for people, one JSON object with --json."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, TextIO


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def seq_range(row: dict[str, Any]) -> str:
    """A finding's `seq_from`–`seq_to` as printed (empty when it names no seqs)."""
    return "" if row["seq_from"] is None else f"{row['seq_from']}–{row['seq_to']}"


def print_json(obj: Any, out: TextIO | None = None) -> None:
    # sys.stdout is looked up at each call, so a redirected stdout (tests, callers) gets it
    (out or sys.stdout).write(json.dumps(obj, default=_default, sort_keys=False) + "\n")


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Render dict rows as an aligned text table (columns default to the first row's keys)."""
    if not rows:
        return "(none)"
    columns = list(columns or rows[0].keys())
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):  # as --json prints it (`valid`: true / false / unknown)
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def live_status():  # noqa: ANN201 - returns a callable that updates one live line
    """A live status line on stderr (rich): each call replaces the text; stops at exit."""
    import atexit

    from rich.console import Console

    status = Console(stderr=True).status("starting")
    status.start()
    atexit.register(status.stop)
    return status.update


class SparkProgress:
    """While open, reports the running Spark stages' task progress and an ETA every second.

    `say` gets '<label>: stage 3, 12/40 tasks (30 %), ETA 25 s'. Used around long steps
    (ingest batches, the pipeline) when a person watches a terminal; nothing without `say`.
    """

    def __init__(self, spark: Any, say: Any, label: str, interval_s: float = 1.0):
        self.spark, self.say, self.label, self.interval_s = spark, say, label, interval_s
        self._stop = None

    def __enter__(self) -> SparkProgress:
        import threading

        if self.say is None:
            return self
        self._stop = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._stop.set()

    def _watch(self) -> None:
        import time

        tracker = self.spark.sparkContext.statusTracker()
        started = time.monotonic()
        while not self._stop.wait(self.interval_s):
            done = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done, total = done + info.numCompletedTasks, total + info.numTasks
            if not total:
                continue
            elapsed = time.monotonic() - started
            eta = f", ETA {elapsed * (total - done) / done:.0f} s" if done else ""
            self.say(f"{self.label}: {done}/{total} tasks ({100 * done // total} %){eta}")
