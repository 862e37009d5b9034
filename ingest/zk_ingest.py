"""`ingest zk`: ZooKeeper capture files and saved dumps (JSONL) → bronze.zk_changes.

Rows that are not JSON, or lack ts / path / op / zookeeper, go to bronze.quarantine with the
reason; non-blank lines read = rows accepted + rows quarantined, per file (blank
lines are not records). Incremental like trace
ingest (manifest kind `zk`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.files import InputFile, discover, new_files, read_numbered_lines
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import INGESTED_FILES, QUARANTINE, ZK_CHANGES, conform

log = logging.getLogger(__name__)

KIND = "zk"
# Distinct from traces (*.jsonl), so that both can sit in one capture folder.
ZK_SUFFIXES = (".zk.jsonl", ".zk.jsonl.gz")
OPS = ["snapshot", "create", "change", "delete", "resync"]

# One line of a capture file, as zk_capture writes it.
ZK_ROW = T.StructType(
    [
        T.StructField("ts", T.StringType()),
        T.StructField("zookeeper", T.StringType()),
        T.StructField("path", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("version", T.IntegerType()),
        T.StructField("ephemeral_owner", T.LongType()),
        T.StructField("data", T.StringType()),
        T.StructField("decoded", T.StringType()),
        T.StructField("capture_id", T.StringType()),
    ]
)


@dataclass
class ZkIngestReport:
    files: int = 0
    skipped_files: int = 0
    records: int = 0
    accepted: int = 0
    quarantined: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def parse_zk_rows(lines: DataFrame) -> DataFrame:
    """Numbered JSONL lines → ZK_ROW fields, ts as a timestamp, and `reason` when refused."""
    row = F.from_json(F.col("value"), ZK_ROW, {"mode": "PERMISSIVE"})
    parsed = lines.select("source_file", "line_number", F.col("value").alias("raw"), row.alias("r"))
    ts = F.to_timestamp(F.col("r.ts"))
    reason = (
        F.when(F.col("r").isNull(), F.lit("not a JSON object"))
        .when(F.col("r.path").isNull(), F.lit("missing path"))
        .when(F.col("r.zookeeper").isNull(), F.lit("missing zookeeper"))
        .when(~F.col("r.op").isin(*OPS), F.concat(F.lit(f"op not one of {OPS}: "), F.col("r.op")))
        .when(ts.isNull(), F.concat(F.lit("ts is not an ISO-8601 time: "), F.col("r.ts")))
    )
    return parsed.select(
        "source_file",
        "line_number",
        "raw",
        ts.alias("ts"),
        *[F.col(f"r.{f.name}").alias(f.name) for f in ZK_ROW.fields if f.name != "ts"],
        reason.alias("reason"),
    )


def ingest_zk(
    lakehouse: Lakehouse, path: str | Path, progress: Callable[[str], None] | None = None
) -> ZkIngestReport:
    """Ingest every new capture or dump file under `path` into bronze.zk_changes."""
    started = time.monotonic()
    say = progress or (lambda _: None)
    paths = discover(path, ZK_SUFFIXES)
    new = new_files(lakehouse, KIND, paths)
    report = ZkIngestReport(files=len(new), skipped_files=len(paths) - len(new))
    if new:
        counts = _ingest_batch(lakehouse, new)
        report.records, report.accepted, report.quarantined = counts
        say(f"ingested {len(new)} zk capture files, {report.records} rows")
    report.seconds = round(time.monotonic() - started, 3)
    log.info("ingest zk: %s", report.as_dict())
    return report


def _ingest_batch(lakehouse: Lakehouse, files: list[InputFile]) -> tuple[int, int, int]:
    ingest_id = str(uuid.uuid4())
    at = datetime.now(UTC).replace(tzinfo=None)
    paths = [f.path for f in files]
    rows = (
        read_numbered_lines(lakehouse.spark, paths)
        .filter(F.trim("value") != "")
        .transform(parse_zk_rows)
        .withColumns({"ingest_id": F.lit(ingest_id), "ingested_at": F.lit(at).cast("timestamp")})
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        accepted = rows.filter(F.col("reason").isNull()).withColumn(
            "capture_id", F.coalesce("capture_id", F.lit(ingest_id))
        )
        refused = rows.filter(F.col("reason").isNotNull()).select(
            F.lit("zk_changes").alias("target_table"),
            F.lit(None).cast("string").alias("run_id"),
            "source_file",
            "line_number",
            "raw",
            "reason",
            F.lit("zk_format").alias("check"),
            "ingest_id",
            F.col("ingested_at").alias("quarantined_at"),
        )
        lakehouse.replace_where("zk_changes", conform(accepted, ZK_CHANGES), {"source_file": paths})
        lakehouse.replace_where("quarantine", conform(refused, QUARANTINE), {"source_file": paths})
        per_file = {
            r.source_file: (r.n, r.ok)
            for r in rows.groupBy("source_file")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.sum(F.col("reason").isNull().cast("long")).alias("ok"),
            )
            .collect()
        }
    finally:
        rows.unpersist()
    manifest = [
        (KIND, f.path, f.content_hash, f.size_bytes, *_counts(per_file.get(f.path)), ingest_id, at)
        for f in files
    ]
    lakehouse.merge("ingested_files", lakehouse.spark.createDataFrame(manifest, INGESTED_FILES))
    totals = [sum(_counts(per_file.get(f.path))[i] for f in files) for i in range(3)]
    return totals[0], totals[1], totals[2]


def _counts(pair: tuple[int, int] | None) -> tuple[int, int, int]:
    n, ok = pair or (0, 0)
    return n, ok, n - ok
