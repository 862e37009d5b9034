"""`ingest traces`: trace files → bronze events, refused records → quarantine, then run checks.

Incremental: a file already ingested with the same content hash is skipped. A file is
ingested whole within one batch; its rows in every table are replaced together, so re-running
after a crash, or after the file changed, never duplicates rows.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checks.gate import gate_rows
from checks.run_checks import check_ingested_runs
from ingest.files import InputFile, Progress, batches, discover, new_files, read_numbered_lines
from ingest.trace_format import FORMAT_CHECK, ROLE_TABLE, parse_lines, target_table, with_defaults
from ingest.zk_ingest import ZK_SUFFIXES
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import INGESTED_FILES, QUARANTINE, TABLES, conform

log = logging.getLogger(__name__)

TRACE_SUFFIXES = (".jsonl", ".jsonl.gz")


@dataclass
class IngestReport:
    files: int = 0
    skipped_files: int = 0
    records: int = 0
    accepted: int = 0
    quarantined: int = 0
    runs: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def ingest_traces(
    lakehouse: Lakehouse, path: str | Path, progress: Progress | None = None
) -> IngestReport:
    """Ingest every new trace file under `path`; return what was read, accepted and refused."""
    started = time.monotonic()
    say = progress or (lambda _: None)
    paths = discover(path, TRACE_SUFFIXES, exclude=ZK_SUFFIXES)
    new = new_files(lakehouse, "trace", paths, say)
    report = IngestReport(files=len(new), skipped_files=len(paths) - len(new))
    runs: set[str] = set()
    done = 0
    for batch in batches(new):
        counts, batch_runs = _ingest_batch(lakehouse, batch)
        report.records += counts["records"]
        report.accepted += counts["accepted"]
        report.quarantined += counts["quarantined"]
        runs |= batch_runs
        done += len(batch)
        rate = report.records / max(time.monotonic() - started, 1e-9)
        say(f"ingested {done}/{len(new)} files, {report.records} records ({rate:,.0f} records/s)")
    report.runs = sorted(runs)
    report.seconds = round(time.monotonic() - started, 3)
    log.info("ingest traces: %s", report.as_dict())
    return report


def _ingest_batch(lakehouse: Lakehouse, files: list[InputFile]) -> tuple[dict[str, int], set[str]]:
    spark = lakehouse.spark
    ingest_id = str(uuid.uuid4())
    at = datetime.now(UTC).replace(tzinfo=None)
    paths = [f.path for f in files]
    records = (
        read_numbered_lines(spark, paths)
        .transform(parse_lines)
        .transform(with_defaults)
        .withColumns({"ingest_id": F.lit(ingest_id), "ingested_at": F.lit(at).cast("timestamp")})
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        refused = _format_quarantine(records, ingest_id, at)
        accepted_rows = records.filter(F.col("reason").isNull())
        quarantine_parts = [refused]
        results = []
        for role, table in ROLE_TABLE.items():
            gate = gate_rows(accepted_rows.filter(F.col("role") == role), table, ingest_id, at)
            lakehouse.replace_where(
                table, conform(gate.passed, TABLES[table].schema), {"source_file": paths}
            )
            quarantine_parts.append(gate.quarantined)
            results.append(gate.check_results)
        quarantine = _union(quarantine_parts)
        lakehouse.replace_where("quarantine", quarantine, {"source_file": paths})
        for result in results:
            lakehouse.append("check_results", result)
        per_file, runs = _counts(lakehouse, records, paths)
        _record_files(lakehouse, files, per_file, ingest_id, at)
    finally:
        records.unpersist()
    check_ingested_runs(lakehouse, sorted(runs), ingest_id, at)
    totals = {
        k: sum(c[k] for c in per_file.values()) for k in ("records", "accepted", "quarantined")
    }
    return totals, runs


def _format_quarantine(records: DataFrame, ingest_id: str, at: datetime) -> DataFrame:
    refused = records.filter(F.col("reason").isNotNull()).select(
        target_table(F.col("role")).alias("target_table"),
        "run_id",
        "source_file",
        "line_number",
        "raw",
        "reason",
        F.lit(FORMAT_CHECK).alias("check"),
        F.lit(ingest_id).alias("ingest_id"),
        F.lit(at).cast("timestamp").alias("quarantined_at"),
    )
    return conform(refused, QUARANTINE)


def _union(parts: list[DataFrame]) -> DataFrame:
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def _counts(
    lakehouse: Lakehouse, records: DataFrame, paths: list[str]
) -> tuple[dict[str, dict[str, int]], set[str]]:
    """Per file: records read, and the accepted and quarantined rows the tables now hold.

    Fails loudly if read != accepted + quarantined for any file. Aggregates are per file
    and per run, so what is collected is small.
    """
    in_batch = F.col("source_file").isin(paths)
    read = {r.source_file: r["count"] for r in records.groupBy("source_file").count().collect()}
    quarantined = _rows_per_file(lakehouse.read("quarantine").filter(in_batch))
    accepted: dict[str, int] = {}
    for table in ROLE_TABLE.values():
        for path, n in _rows_per_file(lakehouse.read(table).filter(in_batch)).items():
            accepted[path] = accepted.get(path, 0) + n
    per_file = {}
    for path in paths:
        counts = {
            "records": read.get(path, 0),
            "accepted": accepted.get(path, 0),
            "quarantined": quarantined.get(path, 0),
        }
        if counts["records"] != counts["accepted"] + counts["quarantined"]:
            raise RuntimeError(f"ingest of {path} does not reconcile: {counts}")
        per_file[path] = counts
    runs = records.filter(F.col("run_id").isNotNull()).select("run_id").distinct().collect()
    return per_file, {r.run_id for r in runs}


def _rows_per_file(df: DataFrame) -> dict[str, int]:
    distinct_lines = df.select("source_file", "line_number").distinct()
    return {
        r.source_file: r["count"] for r in distinct_lines.groupBy("source_file").count().collect()
    }


def _record_files(
    lakehouse: Lakehouse,
    files: list[InputFile],
    per_file: dict[str, dict[str, int]],
    ingest_id: str,
    at: datetime,
) -> None:
    """Manifest rows, written last: a batch that did not finish is ingested again next time."""
    rows = [
        (
            "trace",
            f.path,
            f.content_hash,
            f.size_bytes,
            per_file[f.path]["records"],
            per_file[f.path]["accepted"],
            per_file[f.path]["quarantined"],
            ingest_id,
            at,
        )
        for f in files
    ]
    lakehouse.merge("ingested_files", lakehouse.spark.createDataFrame(rows, INGESTED_FILES))
