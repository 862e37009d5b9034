"""A lock file in a local lakehouse: one job at a time decides which input files are new.

Two ingests that both found the same file new would both take it in (each with its own batch
verdicts); with the lock the second one waits, then finds the file in the manifest. A job
killed while holding it releases it (the kernel drops a dead process's flock). Tables in a
catalog have no lakehouse folder: there, Delta's commit conflicts are the only guard.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pulsar_audit.errors import ConcurrentJobError

log = logging.getLogger(__name__)

LOCK_WAIT_S = 1800.0
LOCK_POLL_S = 0.5


@dataclass
class _Held:
    """A lock file this process holds (fd), and how many of its threads use or await it."""

    fd: int | None = None
    users: int = 0
    taking: threading.Lock = field(default_factory=threading.Lock)


# The lock keeps other jobs out; the steps one job runs side by side
# (pulsar_audit.spark.side_by_side, e.g. the trace and the log ingest, which take in different
# files) share it: the first thread takes the file lock, the last one out releases it.
_HELD: dict[Path, _Held] = {}
_GUARD = threading.Lock()


@contextmanager
def exclusive(folder: Path, name: str, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold `folder/_locks/<name>.lock` for the block; wait at most `wait_s` for it.

    Shared by this process's threads: a thread enters at once while another of them holds it.
    """
    path = (folder / "_locks" / f"{name}.lock").absolute()
    with _GUARD:
        held = _HELD.setdefault(path, _Held())
        held.users += 1
    try:
        with held.taking:
            if held.fd is None:
                held.fd = _take(path, name, wait_s)
        yield
    finally:
        with _GUARD:
            held.users -= 1
            if not held.users:
                del _HELD[path]
                if held.fd is not None:
                    os.close(held.fd)  # closing the descriptor releases the lock


def _take(path: Path, name: str, wait_s: float) -> int:
    """Open and flock the lock file (waiting at most `wait_s`); its descriptor."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    waited = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise ConcurrentJobError(
                    f"{path}: another pulsar-audit job has held the {name} lock for more "
                    f"than {wait_s:.0f} s; nothing was written. Run the command again when "
                    "it is done"
                ) from None
            if not waited:
                log.warning("%s: another job holds it, waiting", path)
                waited = True
            time.sleep(LOCK_POLL_S)
