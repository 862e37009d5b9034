"""Copy the part of each broker/bookie log written during a run next to the run's trace.

At the start of a run we note each log file's size; from there on, the new part goes to
<out>/logs/<component>/<process>.log — component broker or bookie, the folders that
`ingest logs --source` takes (a standalone's single log holds broker and bookie lines; it goes
under broker/; AutoRecovery's under bookie/) — listed in <out>/logs/manifest.json for log
ingest at the end of the run.

Rolling (`roll_s`, for `watch`, which reads a file once, when it first lists it): every
`roll_s` seconds the log entries completed since the last roll are written, whole, as the
next segment <process>.NNNNN.log (written under a name no reader takes, then renamed), so
that the watch sees an unload or a bookie's loss within seconds. An entry is complete once
the next one has begun (a stack trace's lines stay with their entry), or once its log has
been quiet for a roll. The host of a segment is its process, as for the whole file
(`ingest.logs.host_from_filename` drops the `.NNNNN`).

Any other file the harness writes into the landing folder while the run goes on (the client
log) is rolled the same way from its own `.live` name (`capture.spool.live_name`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from pathlib import Path

from capture.processes import ClusterState
from capture.spool import LIVE_SUFFIX, OPEN_SUFFIX
from pulsar_audit.log_lines import STARTS_GO_ENTRY, STARTS_WITH_DATE

log = logging.getLogger(__name__)

# AutoRecovery's log goes with the bookies' (BookKeeper's auditor and replication worker).
COMPONENT = {
    "standalone": "broker",
    "broker": "broker",
    "bookie": "bookie",
    "autorecovery": "bookie",
}
# where a log entry begins: a date (Java and C++ clients' layouts), or logrus' `time=` (Go)
_ENTRY = re.compile(f"{STARTS_WITH_DATE}|{STARTS_GO_ENTRY}".encode(), re.MULTILINE)


def mark(state: ClusterState | None) -> dict[str, dict]:
    """Where each broker/bookie log of `state` ends now."""
    if state is None:
        return {}
    marks = {}
    for spec in state.processes:
        if spec.role in COMPONENT:
            path = Path(spec.log)
            marks[spec.name] = {
                "component": COMPONENT[spec.role],
                "source": str(path),
                "offset": path.stat().st_size if path.exists() else 0,
            }
    return marks


def complete_entries(chunk: bytes, quiet: bool) -> int:
    """How many bytes of `chunk` (a log's new part) hold complete entries: up to the start of
    its last entry (which may still get continuation lines), or every whole line when the log
    has been quiet."""
    whole = chunk.rfind(b"\n") + 1
    if quiet or not whole:
        return whole
    last = 0  # the start of the last entry begun, on a whole line or on the line being written
    for found in _ENTRY.finditer(chunk):
        last = found.start()
    return last


class LogRoller:
    """The new part of each log of `marks` (`mark`), copied into `dest` by `close` or, with
    `roll_s`, in segments while the run goes on (a thread of its own)."""

    def __init__(self, marks: dict[str, dict], dest: Path, roll_s: float | None = None):
        self.marks, self.dest, self.roll_s = marks, dest, roll_s
        self.rows: list[dict] = []
        self._offsets = {name: info["offset"] for name, info in marks.items()}
        self._sizes: dict[str, int] = {}  # each log's size at the last roll
        self._segments = dict.fromkeys(marks, 0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        if roll_s and marks:
            self._thread = threading.Thread(target=self._run, name="log-roller", daemon=True)
            self._thread.start()

    def add(self, name: str, component: str, source: Path) -> None:
        """Roll one more log from its start (one the harness writes itself)."""
        with self._lock:
            self.marks[name] = {"component": component, "source": str(source), "offset": 0}
            self._offsets[name], self._segments[name] = 0, 0
        if self.roll_s and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="log-roller", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.roll_s):
            try:
                self.roll(final=False)
            except OSError:  # the roller must never fail the run it observes: next time
                log.warning("rolling the logs failed; trying again in %s s", self.roll_s,
                            exc_info=True)  # fmt: skip

    def roll(self, final: bool) -> None:
        """Write each log's complete new entries as its next segment (all of it when final)."""
        with self._lock:
            for name, info in self.marks.items():
                source = Path(info["source"])
                size = source.stat().st_size if source.exists() else 0
                if size < self._offsets[name]:  # truncated or replaced: a new log from its start
                    log.warning("log %s shrank below what was rolled: rolling it anew", source)
                    self._offsets[name] = 0
                quiet = final or self._sizes.get(name) == size
                self._sizes[name] = size
                if size <= self._offsets[name]:
                    continue
                with open(source, "rb") as src:
                    src.seek(self._offsets[name])
                    chunk = src.read(size - self._offsets[name])
                cut = len(chunk) if final else complete_entries(chunk, quiet)
                if cut:
                    self._write_segment(name, info, chunk[:cut])

    def _write_segment(self, name: str, info: dict, data: bytes) -> None:
        target = self.dest / info["component"] / f"{name}.{self._segments[name]:05d}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        writing = target.with_name(target.name + OPEN_SUFFIX)
        writing.write_bytes(data)
        writing.rename(target)  # whole, under the name the watch takes
        # in place now: its bytes are rolled, whatever happens next
        self._offsets[name] += len(data)
        self._segments[name] += 1
        self._row(name, info, target, len(data))

    def _row(self, name: str, info: dict, target: Path, size: int) -> None:
        row = {"file": str(target.relative_to(self.dest)), "process": name, **info}
        self.rows.append(row | {"bytes": size})

    def stop(self) -> None:
        """No more rolling (what was rolled stays); `close` does it too."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def close(self, settle_s: float = 0.5) -> list[dict]:
        """The rest of every log copied; the manifest written; its rows returned."""
        self.stop()
        if not self.marks:
            return []
        time.sleep(settle_s)  # the last lines of the run reach the file (log4j flushes per line)
        self.dest.mkdir(parents=True, exist_ok=True)
        if self.roll_s:
            self.roll(final=True)
            for info in self.marks.values():  # a log the harness wrote: its segments stay
                source = Path(info["source"])
                if source.name.endswith(LIVE_SUFFIX):
                    source.unlink(missing_ok=True)
        else:
            for name, info in self.marks.items():
                self._copy_whole(name, info)
        (self.dest / "manifest.json").write_text(json.dumps(self.rows, indent=1) + "\n")
        return self.rows

    def _copy_whole(self, name: str, info: dict) -> None:
        target = self.dest / info["component"] / f"{name}.log"
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(info["source"], "rb") as src, open(target, "wb") as out:
            src.seek(info["offset"])
            while chunk := src.read(1 << 20):
                out.write(chunk)
        self._row(name, info, target, target.stat().st_size)


def copy_since(marks: dict[str, dict], dest: Path, settle_s: float = 0.5) -> list[dict]:
    """Copy each log from its mark to its current end into `dest`; returns the manifest rows."""
    return LogRoller(marks, dest).close(settle_s)


def seal_live(folder: Path) -> list[Path]:
    """Give the `.live` logs under `folder` their final names (those no roller took: a
    consumer process's log, written whole by the time it exits); the paths sealed."""
    sealed = []
    for path in sorted(folder.rglob(f"*{LIVE_SUFFIX}")):
        final = path.with_name(path.name.removesuffix(LIVE_SUFFIX))
        path.rename(final)
        sealed.append(final)
    return sealed
