"""`ingest traces`: trace files → bronze events, refused records → quarantine.

One pass per batch (ingest/skeleton.py): each line is parsed once, checked against the trace
format and every row rule of its table, and routed to producer_events, consumer_events,
run_events or quarantine. The row rules come from the caller (a `RowGate`: checks/gate.py's,
wired in by jobs/ingest.py, which also runs the table-level checks of the touched runs once,
after the last batch); the gate judges each batch's per-run rule counts.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from ingest.files import columnar_staging, parquet_schema, read_raw_lines, read_raw_rows
from ingest.skeleton import Batch, Progress, discover, ingest_files
from ingest.trace_format import (
    FORMAT_CHECK,
    ROLE_TABLE,
    columnar_problems,
    parse_columnar,
    parse_records,
    target_table,
    to_columnar,
    with_defaults,
)
from ingest.zk_ingest import ZK_SUFFIXES
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.local_frames import local_frame
from pulsar_audit.row_gate import RowGate
from pulsar_audit.schemas import QUARANTINE, RUN_FILES, TABLES, TRACE_COLUMNAR, conform
from pulsar_audit.spark import large_text, side_by_side
from pulsar_audit.storage import FileStat

log = logging.getLogger(__name__)

JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
COLUMNAR_SUFFIXES = (".parquet",)  # the columnar form of trace format v1
TRACE_SUFFIXES = (*JSONL_SUFFIXES, *COLUMNAR_SUFFIXES)
KIND = "trace"


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


class TraceSource:
    """Trace format v1 lines → the three event tables and quarantine."""

    tables = (*ROLE_TABLE.values(), "quarantine")
    stages_raw_lines = True
    group_keys = ("run_id", "role")

    def __init__(self, gate: RowGate):
        self.gate = gate

    def kind_of(self, path: str) -> str:
        return KIND

    def read(self, spark: SparkSession, batch: Batch) -> DataFrame:
        return read_raw_lines(spark, batch.uris)

    def parse(self, lines: DataFrame, position: tuple[str, ...], batch: Batch) -> DataFrame:
        # the typed parse first once a batch is as large as a large input (its larger plan
        # costs about 0.4 s more to plan; it saves about 6 µs of CPU per line)
        large = large_text((f.path, f.size_bytes) for f in batch.files)
        return parse_records(lines, position, typed_first=large)

    def stage(self, lines: DataFrame, batch: Batch) -> DataFrame:
        position = ("_file_uri", "_block_start", "_row_id")  # the file is named per block
        records = self.parse(lines, position, batch).transform(with_defaults)
        table = target_table(F.col("role"))
        format_ok = F.col("reason").isNull() & ~F.col("_blank")
        violated = F.when(format_ok, self.gate.violated(table)).otherwise(F.array())
        bad = F.col("reason").isNotNull() | (F.size("_violated") > 0)
        return (
            records.withColumn("_violated", violated)
            .withColumn("_bad", bad)
            .select(
                *[c for c in records.columns if c != "raw"],
                "_violated",
                "_bad",
                # the line's text is kept (and, for a columnar row, made) only where it goes
                # to quarantine
                F.when(F.col("_bad"), self.raw_text(F.col("raw"))).alias("raw"),
                F.when(F.col("_blank"), None)
                .when(F.col("_bad"), "quarantine")
                .otherwise(table)
                .alias("_table"),
                F.lit(1).alias("_units"),
                format_ok.alias("_gated"),
            )
        )

    def raw_text(self, raw: Column) -> Column:
        """What quarantine keeps of a refused record: the line as written."""
        return raw

    def measures(self) -> list[Column]:
        return self.gate.counts(F.col("_gated"))

    def output(self, staged: DataFrame, table: str, batch: Batch) -> DataFrame:
        rows = staged.filter(F.col("_table") == table).withColumns(
            {"ingest_id": F.lit(batch.ingest_id), "ingested_at": F.lit(batch.at)}
        )
        if table != "quarantine":
            return conform(rows, TABLES[table].schema)
        refused = rows.select(
            target_table(F.col("role")).alias("target_table"),
            "run_id",
            "source_file",
            "line_number",
            "raw",
            F.coalesce("reason", self.gate.reasons(target_table(F.col("role")))).alias("reason"),
            F.when(F.col("reason").isNotNull(), F.lit(FORMAT_CHECK))
            .otherwise(F.concat_ws(",", "_violated"))
            .alias("check"),
            "ingest_id",
            F.col("ingested_at").alias("quarantined_at"),
        )
        return conform(refused, QUARANTINE)

    def after_batch(self, lakehouse: Lakehouse, counts: list[Row], batch: Batch) -> None:
        """GX judges the batch's per-run rule counts; which runs each file holds is recorded."""

        def verdicts() -> None:
            spark, gate = lakehouse.spark, self.gate
            results = gate.judge(spark, counts, ROLE_TABLE, batch.ingest_id, batch.at)
            if results is not None:
                # keyed by the batch's (content-derived) id: a redone batch replaces its verdicts
                lakehouse.replace_where(
                    "check_results",
                    results,
                    {"ingest_id": [batch.ingest_id], "level": [gate.level]},
                )

        files = run_file_rows(lakehouse, counts, batch)
        side_by_side(
            verdicts,
            lambda: lakehouse.replace_where("run_files", files, {"source_file": batch.paths}),
        )


class ColumnarTraceSource(TraceSource):
    """Trace format v1 in its columnar form (Parquet): the same tables, rules and reasons;
    the types are checked once per file, and a row is line number N of its file."""

    def read(self, spark: SparkSession, batch: Batch) -> DataFrame:
        for file in batch.files:
            schema = parquet_schema(spark, file)
            problems = columnar_problems(schema)
            if problems:
                raise InputError(
                    f"{file.path}: not trace format v1's columnar form "
                    f"(docs/trace-format.md): {'; '.join(problems)}"
                )
        return read_raw_rows(spark, batch.uris, TRACE_COLUMNAR)

    def parse(self, lines: DataFrame, position: tuple[str, ...], batch: Batch) -> DataFrame:
        return parse_columnar(lines, position)

    def raw_text(self, raw: Column) -> Column:
        """The row as read (`parse_columnar`'s struct) as a JSON object."""
        return F.to_json(raw)


def write_columnar(
    lines: DataFrame, folder: Path, prefix: str, typed_first: bool = True
) -> list[Path]:
    """Trace lines (`value`) → `<prefix>-NNNNN.parquet` files in `folder`: the columnar form,
    parsed by this parser. Every line must be a record the format accepts: a refused one
    fails the write with its reason (nothing half-written is left).

    typed_first: as parse_records' (a caller that knows its input is small passes False)."""
    lines = lines.withColumn("line_number", F.lit(0))
    records = parse_records(lines, ("line_number",), typed_first)
    refused = F.col("reason").isNotNull() | F.col("_blank")
    failed = F.raise_error(F.concat(F.lit("a trace line the format refuses: "), "reason"))
    checked = records.withColumn("run_id", F.when(refused, failed).otherwise(F.col("run_id")))
    staging = folder / columnar_staging(prefix)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        to_columnar(checked).write.mode("overwrite").parquet(str(staging))
        written = []
        for n, part in enumerate(sorted(staging.glob("part-*.parquet"))):
            target = folder / f"{prefix}-{n:05d}.parquet"
            part.rename(target)
            written.append(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written


def columnar_from_jsonl(spark: SparkSession, files: list[Path], prefix: str) -> list[Path]:
    """Rewrite the JSONL trace `files` (of one folder) as columnar files named `prefix`-NNNNN;
    the JSONL files are removed once the columnar ones are written, so the folder holds each
    record once."""
    if not files:
        return []
    folder = files[0].parent
    large = large_text((str(f), f.stat().st_size) for f in files)
    written = write_columnar(spark.read.text([str(f) for f in files]), folder, prefix, large)
    for file in files:
        file.unlink()
    return written


def run_file_rows(lakehouse: Lakehouse, counts: list[Row], batch: Batch) -> DataFrame:
    """bronze.run_files: rows each file gave each table for each run (small: from the counts)."""
    rows: dict[tuple[str, str, str], int] = {}
    for row in counts:
        if row["_table"] is None or row["run_id"] is None:
            continue
        key = (row["run_id"], row["_table"], row["source_file"])
        rows[key] = rows.get(key, 0) + row["_rows"]
    data = [(*key, n, batch.ingest_id, batch.at) for key, n in sorted(rows.items())]
    return local_frame(lakehouse.spark, data, RUN_FILES)


def ingest_traces(
    lakehouse: Lakehouse,
    path: str | Path,
    gate: RowGate,
    progress: Progress | None = None,
    listed: list[FileStat] | None = None,
) -> IngestReport:
    """Ingest every new trace file under `path`, gated row by row by `gate`; return what was
    read, accepted and refused, and the runs the ingest touched.

    listed: the files under `path` when the caller has listed them already.
    """
    files = discover(lakehouse.spark, str(path), TRACE_SUFFIXES, ZK_SUFFIXES, listed)
    columnar = [f for f in files if f.name.endswith(COLUMNAR_SUFFIXES)]
    jsonl = [f for f in files if not f.name.endswith(COLUMNAR_SUFFIXES)]
    outcome = ingest_files(lakehouse, TraceSource(gate), jsonl, progress)
    if columnar:
        outcome = outcome.plus(
            ingest_files(lakehouse, ColumnarTraceSource(gate), columnar, progress)
        )
    report = IngestReport(
        files=outcome.files,
        skipped_files=outcome.skipped_files,
        records=outcome.total("records"),
        accepted=outcome.total("accepted"),
        quarantined=outcome.total("quarantined"),
        runs=sorted({r["run_id"] for r in outcome.counts if r["run_id"] is not None}),
        seconds=outcome.seconds,
    )
    log.info("ingest traces: %s", report.as_dict())
    return report
