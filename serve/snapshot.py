"""The lakehouse now or as of earlier (`message --as-of`), and the check that a run exists."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

from pyspark.sql import DataFrame

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.spark import side_by_side

MAX_NEAR_RUNS = 5
# The version a VERSION --as-of counts in: the table that holds the findings.
AS_OF_TABLE = "anomalies"
# A recomputation writes these before the findings: the end of a VERSION's snapshot.
RECOMPUTED_WITH = ("message_history", "delivery", AS_OF_TABLE)


@dataclass(frozen=True)
class Snapshot:
    """Every table as it stood at `at` (now when None), and the versions that were read."""

    lakehouse: Lakehouse
    at: datetime | None = None

    def read(self, table: str) -> DataFrame:
        return self.lakehouse.read_as_of(table, self.at)

    def versions(self, tables: tuple[str, ...]) -> dict[str, int | None]:
        """Each table's version read (None: not written yet). Now: a local lakehouse's from
        the names in `_delta_log/`, no Spark job (six history jobs were a third of a warm
        `message`); as of a time: the tables' histories, side by side."""
        if self.at is None:
            found = self.lakehouse.versions(tables)
            return {t: (found[t] if found[t] >= 0 else None) for t in tables}
        found = side_by_side(*(partial(self.lakehouse.version_at, t, self.at) for t in tables))
        return dict(zip(tables, found, strict=True))


def parse_as_of(lakehouse: Lakehouse, text: str | None) -> datetime | None:
    """--as-of VERSION (of gold.anomalies) or TIMESTAMP (ISO 8601) → a UTC moment.

    VERSION N is the lakehouse while gold.anomalies was at version N: every table as of just
    before the next write to gold.anomalies or to the silver tables it is built from (a
    recomputation begins with those), or now when there was none.
    """
    if text is None:
        return None
    if text.isdigit():
        return _while_at_version(lakehouse, int(text))
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--as-of {text!r}: expected a version number of gold.{AS_OF_TABLE} or an ISO 8601 "
            "timestamp such as 2026-11-22T10:15:00Z"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _while_at_version(lakehouse: Lakehouse, version: int) -> datetime:
    commits = dict(lakehouse.commits(AS_OF_TABLE))
    if version not in commits:
        raise InputError(
            f"--as-of {version}: gold.{AS_OF_TABLE} has no version {version} "
            f"(versions {min(commits)}..{max(commits)})"
        )
    written = commits[version]
    later = [ts for table in RECOMPUTED_WITH for _, ts in lakehouse.commits(table) if ts > written]
    if not later:
        return datetime.now(UTC).replace(tzinfo=None)
    return min(later) - timedelta(milliseconds=1)


def check_run_exists(snapshot: Snapshot, run_id: str) -> None:
    """Fail naming the runs of gold.run_summary whose ids are near `run_id` when it is none."""
    summary = snapshot.read("run_summary")
    runs = [r["run_id"] for r in summary.select("run_id").distinct().collect()]  # one per run
    if run_id in runs:
        return
    near = difflib.get_close_matches(run_id, runs, n=MAX_NEAR_RUNS)
    if near:
        hint = f"near names: {', '.join(near)}"
    elif runs:
        hint = f"none is near; `pulsar-audit summary` lists its {len(runs)} run(s)"
    else:
        hint = "it has no runs yet: `pulsar-audit analyze PATH` ingests and judges some"
    raise InputError(f"run {run_id!r} does not exist in this lakehouse ({hint})")
