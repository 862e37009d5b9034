"""`quarantine list`, and analyze's count: the records ingest refused (bronze.quarantine)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse

# The keys of `quarantine list --json`'s rows, in order.
QUARANTINE_FIELDS = ("source_file", "line_number", "target_table", "run_id", "reason", "raw")
DEFAULT_LIMIT = 100


def quarantined_in(lakehouse: Lakehouse, source_files: list[str]) -> dict[str, int]:
    """How many records of these input files (identity paths) are quarantined: records, files."""
    if not source_files:
        return {"records": 0, "files": 0}
    counts = (
        lakehouse.read_matching("quarantine", {"source_file": source_files})
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.countDistinct("source_file").alias("files"),
        )
        .first()
    )
    return {"records": int(counts["records"]), "files": int(counts["files"])}


def quarantine_rows(
    lakehouse: Lakehouse, run_id: str | None = None, limit: int = DEFAULT_LIMIT
) -> dict[str, Any]:
    """{"total", "rows"}: the quarantined records (of one run), by file and line, first `limit`.

    A record that could not be read as a trace event at all has no run: it is listed only
    without a run.
    """
    refused = lakehouse.read("quarantine")
    if run_id is not None:
        refused = refused.filter(F.col("run_id") == run_id)
    total = refused.count()
    first = (
        refused.select(*QUARANTINE_FIELDS)
        .orderBy("source_file", "line_number", "target_table")
        .limit(limit)
        .collect()
    )
    return {"total": total, "rows": [row.asDict() for row in first]}
