"""Crash-safe trace writer: JSON Lines segments, flushed and fsync'd often.

Events are buffered in memory and written with one `os.write` per batch (whole lines only, so
a crash never leaves half an event), then fsync'd: every `sync_events` events, every
`sync_interval_s` seconds (a background thread, so an idle writer is synced too), on segment
rotation and on close. `durable` counts the events known to be on disk: a crash of the writer
— even SIGKILL — loses none of them. Thread-safe (the Pulsar client calls back on its own thread).

Rolling (`roll_s`, for `watch`, which reads a file once, when it first lists it): the open
segment is written under a name no trace reader takes (`….jsonl.open`) and, every `roll_s`
seconds that it holds events, closed, fsync'd and renamed to its final name, so that a trace
file appears whole, in order. A writer killed mid-segment leaves its `.open` segment: every line
of it that was reported durable is there; `seal_open` gives it its final name.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

SEGMENT_EVENTS = 250_000
OPEN_SUFFIX = ".open"  # a rolling spool's segment still being written
LIVE_SUFFIX = ".live"  # a log written into a landing folder a watch takes, not taken yet


class Spool:
    """Append events (dicts) to <directory>/<prefix>-NNNNN<suffix> segments (suffix `.jsonl`;
    a ZooKeeper capture's `.zk.jsonl`).

    on_sync: called with the durable count after each fsync (e.g. to report progress).
    roll_s: roll the segment into place every this many seconds that it holds events (None:
    each segment is written under its final name).
    """

    def __init__(
        self,
        directory: str | Path,
        prefix: str = "trace",
        sync_events: int = 5000,
        sync_interval_s: float = 0.2,
        segment_events: int = SEGMENT_EVENTS,
        on_sync: Callable[[int], None] | None = None,
        roll_s: float | None = None,
        suffix: str = ".jsonl",
    ):
        self.directory = Path(directory)
        self.suffix = suffix
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.sync_events = sync_events
        self.segment_events = segment_events
        self.on_sync = on_sync
        self.roll_s = roll_s
        self.written = 0  # events handed to write()
        self.durable = 0  # events fsync'd to disk
        self.segments: list[Path] = []
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._in_segment = 0
        self._fd = -1
        self._opened_at = 0.0
        self._closed = threading.Event()
        self._open_segment()
        self._ticker = threading.Thread(
            target=self._tick, args=(sync_interval_s,), name="spool-sync", daemon=True
        )
        self._ticker.start()

    def write(self, event: dict) -> None:
        """Record one event; it is durable at the next sync (at most `sync_interval_s` away)."""
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._lock:
            if self._fd < 0:
                raise ValueError("spool is closed")
            self._pending.append(line)
            self.written += 1
            if len(self._pending) >= self.sync_events:
                self._sync_locked()
            if self._in_segment + len(self._pending) >= self.segment_events:
                self._rotate_locked()

    @property
    def rows(self) -> int:
        """Events written (as `zk_capture.JsonlWriter` counts its rows)."""
        return self.written

    def flush(self) -> None:
        """Hand the buffered events to the OS without waiting for the disk: from here a kill
        of this process (SIGKILL) no longer loses them; a machine crash still may until the
        next fsync. (A consumer calls it before acknowledging what it recorded.)"""
        with self._lock:
            if self._fd >= 0:
                self._write_pending_locked()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            if self._fd < 0:
                return
            self._sync_locked()
            os.close(self._fd)
            self._fd = -1
            self._seal_locked(keep_empty=len(self.segments) == 1)
        self._ticker.join(timeout=2)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals (hold lock)

    def _tick(self, interval_s: float) -> None:
        while not self._closed.wait(interval_s):
            with self._lock:
                if self._fd >= 0 and self.durable != self.written:  # flushed or pending
                    self._sync_locked()
                if self._fd >= 0 and self._roll_due():
                    self._rotate_locked()

    def _roll_due(self) -> bool:
        if self.roll_s is None or not self._in_segment + len(self._pending):
            return False
        return time.monotonic() - self._opened_at >= self.roll_s

    def _write_pending_locked(self) -> None:
        if self._pending:
            data = "".join(self._pending).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            self._in_segment += len(self._pending)
            self._pending.clear()

    def _sync_locked(self) -> None:
        self._write_pending_locked()
        os.fsync(self._fd)
        if self.durable != self.written:
            self.durable = self.written
            if self.on_sync:
                self.on_sync(self.durable)

    def _rotate_locked(self) -> None:
        self._sync_locked()
        os.close(self._fd)
        self._seal_locked(keep_empty=True)
        self._open_segment()

    def _open_segment(self) -> None:
        path = self.directory / f"{self.prefix}-{len(self.segments):05d}{self.suffix}"
        writing = path if self.roll_s is None else _open_name(path)
        self._fd = os.open(writing, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.segments.append(path)
        self._in_segment = 0
        self._opened_at = time.monotonic()
        _fsync_dir(self.directory)  # the new file's name is durable too

    def _seal_locked(self, keep_empty: bool) -> None:
        """The closed segment under its final name (a rolling spool's; synced already); an
        empty last segment after others is removed instead."""
        if self.roll_s is None:
            return
        path = self.segments[-1]
        if self._in_segment or keep_empty:
            _open_name(path).rename(path)
        else:
            _open_name(path).unlink()
            self.segments.pop()
        _fsync_dir(self.directory)


def seal_open(directory: str | Path, prefix: str, suffix: str = ".jsonl") -> list[Path]:
    """Give the `.open` segments a killed writer of `prefix` left their final names (every
    line in them is whole: the spool writes whole lines); the paths sealed."""
    directory = Path(directory)
    sealed = []
    for path in sorted(directory.glob(f"{prefix}-*{suffix}{OPEN_SUFFIX}")):
        final = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
        path.rename(final)
        sealed.append(final)
    if sealed:
        _fsync_dir(directory)
    return sealed


def live_name(path: Path) -> Path:
    """The name a log written into a watched landing folder has until it is whole (a watch
    reads a file once): capture/runlogs.py rolls it from there, or gives it its name."""
    return path.with_name(path.name + LIVE_SUFFIX)


def _open_name(path: Path) -> Path:
    return path.with_name(path.name + OPEN_SUFFIX)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_events(directory: str | Path) -> list[dict]:
    """Every event of the *.jsonl files under `directory` (small traces and tests only)."""
    events = []
    for path in sorted(Path(directory).rglob("*.jsonl")):
        with path.open() as handle:
            events.extend(json.loads(line) for line in handle if line.strip())
    return events
