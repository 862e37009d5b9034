"""A stage of a job: announced on the live line, timed in the log, tagged in Spark's UI and
event log, and a point where the reliability suites inject faults (`stage:<name>`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pulsar_audit import faults
from pulsar_audit.spark import spark_stage

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@contextmanager
def stage(name: str, progress: Progress | None) -> Iterator[None]:
    """Announce a stage on the live line and log how long it took (`-v`: where time goes)."""
    faults.point(f"stage:{name}")
    if progress:
        progress(name)
    started = time.monotonic()
    with spark_stage(name):
        yield
    log.info("stage %s: %.1f s", name, time.monotonic() - started)
