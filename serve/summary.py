"""Read gold back as small lists of dicts for printing (`summary`, `analyze`)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.kinds import RUN_COUNTS
from serve.overlaps import with_overlaps

# The keys of `analyze --json`'s "runs" and "outages" entries, in order.
RUN_FIELDS = (
    "run_id",
    "topic",
    "subscription",
    "subscription_type",
    *RUN_COUNTS,
    "valid",
    "unchecked",
)
OUTAGE_FIELDS = (
    "outage_id",
    "run_id",
    "topic",
    "partition",
    "producer",
    "start",
    "end",
    "duration_ms",
    "backoff_step",
    "causes",
)
# The keys of "why_unknown": a run whose data cannot support a verdict, and why.
UNKNOWN_FIELDS = ("run_id", "topic", "subscription", "reasons")
ANOMALY_FIELDS = (
    "anomaly_id",
    "run_id",
    "topic",
    "subscription",
    "partition",
    "producer",
    "kind",
    "seq_from",
    "seq_to",
    "count",
    "explanation",
    "causes",
)


def _rows(
    lakehouse: Lakehouse,
    table: str,
    fields: tuple[str, ...],
    order: tuple[str, ...],
    run_ids: list[str] | None,
) -> list[dict[str, Any]]:
    # a job's own runs are read from what it wrote when the committed files cannot hold them
    df = lakehouse.read_runs(table, run_ids)
    return [row.asDict(recursive=True) for row in df.select(*fields).orderBy(*order).collect()]


def run_rows(
    lakehouse: Lakehouse,
    run_ids: list[str] | None = None,
    fields: tuple[str, ...] = RUN_FIELDS,
) -> list[dict[str, Any]]:
    """gold.run_summary, one dict per (run, topic, subscription), sorted by that key.

    fields: add "reasons", "outages" or "unattributed" to show why a run is not valid.
    `valid` is JSON's true or false, or the string "unknown" when the data cannot support a
    verdict (gold keeps the three as strings).
    """
    rows = _rows(lakehouse, "run_summary", fields, ("run_id", "topic", "subscription"), run_ids)
    return [{**row, "valid": json_verdict(row["valid"])} if "valid" in row else row for row in rows]


def json_verdict(valid: str) -> bool | str:
    """gold's "true" / "false" / "unknown" → true / false / "unknown" for --json."""
    return {"true": True, "false": False}.get(valid, valid)


def outage_rows(
    lakehouse: Lakehouse,
    run_ids: list[str] | None = None,
    fields: tuple[str, ...] = OUTAGE_FIELDS,
) -> list[dict[str, Any]]:
    """gold.outages, one dict per outage, in time order per producer."""
    order = ("run_id", "topic", "partition", "producer", "start")
    return _rows(lakehouse, "outages", fields, order, run_ids)


def anomaly_rows(
    lakehouse: Lakehouse,
    run_ids: list[str] | None = None,
    fields: tuple[str, ...] = ANOMALY_FIELDS,
) -> list[dict[str, Any]]:
    """gold.anomalies, one dict per anomaly block (a run's blocks, not its messages)."""
    order = ("run_id", "topic", "subscription", "kind", "partition", "producer", "seq_from")
    return _rows(lakehouse, "anomalies", fields, order, run_ids)


def runs_of_files(lakehouse: Lakehouse, source_files: list[str]) -> list[str]:
    """The runs whose events came, all or in part, from these input files (bronze.run_files)."""
    if not source_files:
        return []
    rows = (
        lakehouse.read_matching("run_files", {"source_file": source_files})
        .select("run_id")
        .distinct()
        .collect()
    )
    return sorted(row["run_id"] for row in rows)


def other_run_count(lakehouse: Lakehouse, run_ids: list[str]) -> int:
    """How many runs gold.run_summary holds besides `run_ids`."""
    others = lakehouse.read("run_summary").filter(~F.col("run_id").isin(run_ids))
    return others.select("run_id").distinct().count()


def summary_report(lakehouse: Lakehouse, run_ids: list[str] | None = None) -> dict[str, Any]:
    """{"runs", "outages", "anomalies", "why_unknown"}: the part of `analyze --json` after the
    ingest counts.

    Outages and anomalies carry `causes` (best first); anomalies are blocks, not messages,
    each with `also_counted_as` (`serve.overlaps`).
    why_unknown: the reasons of each (run, topic, subscription) whose verdict is "unknown".
    """
    runs = run_rows(lakehouse, run_ids, (*RUN_FIELDS, "reasons"))
    return {
        "runs": [{k: v for k, v in run.items() if k != "reasons"} for run in runs],
        "outages": outage_rows(lakehouse, run_ids),
        "anomalies": with_overlaps(anomaly_rows(lakehouse, run_ids)),
        "why_unknown": [
            {k: run[k] for k in UNKNOWN_FIELDS} for run in runs if run["valid"] == "unknown"
        ],
    }
