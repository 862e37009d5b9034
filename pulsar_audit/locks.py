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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pulsar_audit.errors import ConcurrentJobError

log = logging.getLogger(__name__)

LOCK_WAIT_S = 1800.0
LOCK_POLL_S = 0.5


@contextmanager
def exclusive(folder: Path, name: str, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold `folder/_locks/<name>.lock` for the block; wait at most `wait_s` for it."""
    path = folder / "_locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConcurrentJobError(
                        f"{path}: another pulsar-audit job has held the {name} lock for more "
                        f"than {wait_s:.0f} s; nothing was written. Run the command again when "
                        "it is done"
                    ) from None
                if not waited:
                    log.warning("%s: another job holds it, waiting", path)
                    waited = True
                time.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
