"""A small table's rows that a long-running job reads again and again (a watch's findings and
alerts, once or twice per micro-batch), kept in the driver while the table is still at the
version they were read at.

A read of a Delta table, however small, costs a Spark job and its planning (about 0.1–0.5 s
here: docs/live.md, "Session 58"), though most micro-batches of a watch write neither
gold.provisional nor gold.alerts. The version is the table's newest commit in its log, read
without Spark (`log_version`) *before* the rows: a commit that lands in between makes the
kept rows stale, never wrong (the next call reads again). Any writer, this process or
another, moves the version on. Only for a local (path) lakehouse; elsewhere every call reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.delta_log import log_version


@dataclass
class KeptRows:
    """The rows of `table` as committed (its `columns`, in that order; None: all) of the runs
    read so far, and the table's version then. `of` answers from them while the table has
    not moved on and they hold the runs asked for; else it reads the table again, for those
    runs and the ones read before (a watch's runs: findings, alerts, run events: short
    lists)."""

    table: str
    columns: tuple[str, ...] | None = None
    rows: tuple[Row, ...] = ()
    runs: frozenset[str] | None = None  # the runs the rows are of (None: every run)
    version: int | None = None
    reads: int = 0  # how many times the table was read (for tests and logs)

    def of(self, lakehouse: Lakehouse, runs: Iterable[str] | None = None) -> list[Row]:
        """The rows of `runs` (None: every row), as the table holds them now; a new list."""
        wanted = None if runs is None else frozenset(runs)
        if not self._holds(lakehouse, wanted):
            self._read(lakehouse, wanted)
        if wanted is None:
            return list(self.rows)
        return [row for row in self.rows if row["run_id"] in wanted]

    def _holds(self, lakehouse: Lakehouse, wanted: frozenset[str] | None) -> bool:
        if self.version is None or lakehouse.config.storage != "path":
            return False
        if self.runs is not None and (wanted is None or not wanted <= self.runs):
            return False
        return log_version(Path(lakehouse.location(self.table))) == self.version

    def _read(self, lakehouse: Lakehouse, wanted: frozenset[str] | None) -> None:
        local = lakehouse.config.storage == "path"
        # first the version, then the rows: a commit in between leaves the rows newer than
        # the version kept, so the next call reads again
        version = log_version(Path(lakehouse.location(self.table))) if local else None
        runs = None if wanted is None else wanted | (self.runs or frozenset())
        # the table as committed (a deferred lakehouse's pending writes are not in the version)
        frame = Lakehouse.read(lakehouse, self.table)
        if runs is not None:
            frame = frame.filter(F.col("run_id").isin(sorted(runs)))
        if self.columns is not None:
            frame = frame.select(*self.columns)
        self.rows = tuple(frame.collect())  # short lists: findings, alerts
        self.runs, self.version = runs, version
        self.reads += 1
