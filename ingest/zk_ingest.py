"""`ingest zk`: ZooKeeper capture files and saved dumps (JSONL) → bronze.zk_changes.

Rows that are not JSON, or lack ts / path / op / zookeeper, go to bronze.quarantine with the
reason; non-blank lines read = rows accepted + rows quarantined, per file (blank
lines are not records). Incremental like trace
ingest (manifest kind `zk`).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.skeleton import Batch, Progress, discover, ingest_files
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import QUARANTINE, ZK_CHANGES, conform
from pulsar_audit.storage import FileStat

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
    ts = F.try_to_timestamp(F.col("r.ts"))  # a bad time is a reason, not a failed job
    reason = (
        F.when(F.col("r").isNull(), F.lit("not a JSON object"))
        .when(F.col("r.path").isNull(), F.lit("missing path"))
        .when(F.col("r.zookeeper").isNull(), F.lit("missing zookeeper"))
        .when(F.col("r.op").isNull(), F.lit(f"missing op (one of {OPS})"))
        .when(~F.col("r.op").isin(*OPS), F.concat(F.lit(f"op not one of {OPS}: "), F.col("r.op")))
        .when(F.col("r.ts").isNull(), F.lit("missing ts"))
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


class ZkSource:
    """Capture and dump lines → bronze.zk_changes; refused lines → quarantine."""

    tables = ("zk_changes", "quarantine")
    stages_raw_lines = False
    group_keys: tuple[str, ...] = ()

    def kind_of(self, path: str) -> str:
        return KIND

    def stage(self, lines: DataFrame, batch: Batch) -> DataFrame:
        blank = F.trim("raw") == ""
        refused = F.col("reason").isNotNull()
        return parse_zk_rows(lines).select(
            "*",
            F.when(blank, None).when(refused, "quarantine").otherwise("zk_changes").alias("_table"),
            F.lit(1).alias("_units"),
            (refused & ~blank).alias("_bad"),
        )

    def measures(self) -> list[Column]:
        return []

    def output(self, staged: DataFrame, table: str, batch: Batch) -> DataFrame:
        rows = staged.filter(F.col("_table") == table).withColumns(
            {"ingest_id": F.lit(batch.ingest_id), "ingested_at": F.lit(batch.at)}
        )
        if table == "zk_changes":
            return conform(
                rows.withColumn("capture_id", F.coalesce("capture_id", F.lit(batch.ingest_id))),
                ZK_CHANGES,
            )
        refused = rows.select(
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
        return conform(refused, QUARANTINE)

    def after_batch(self, lakehouse: Lakehouse, counts: list[Row], batch: Batch) -> None:
        return None


def ingest_zk(
    lakehouse: Lakehouse,
    path: str | Path,
    progress: Progress | None = None,
    listed: list[FileStat] | None = None,
) -> ZkIngestReport:
    """Ingest every new capture or dump file under `path` into bronze.zk_changes.

    listed: the files under `path` when the caller has listed them already.
    """
    files = discover(lakehouse.spark, str(path), ZK_SUFFIXES, listed=listed)
    outcome = ingest_files(lakehouse, ZkSource(), files, progress)
    report = ZkIngestReport(
        files=outcome.files,
        skipped_files=outcome.skipped_files,
        records=outcome.total("records"),
        accepted=outcome.total("accepted"),
        quarantined=outcome.total("quarantined"),
        seconds=outcome.seconds,
    )
    log.info("ingest zk: %s", report.as_dict())
    return report
