"""Input files: fingerprints, batches of whole files, and their lines numbered in Spark."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import Window as W
from pyspark.sql import functions as F

_CHUNK = 1 << 20
BATCH_BYTES = 1 << 30


@dataclass(frozen=True)
class InputFile:
    path: str
    size_bytes: int
    content_hash: str


def fingerprint(path: Path) -> InputFile:
    """Size and SHA-256 of the file's bytes (streamed; the file is never held in memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return InputFile(str(path), path.stat().st_size, digest.hexdigest())


def read_numbered_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """One row per line of `paths`: source_file, line_number (1-based), value."""
    return read_lines(spark, paths).lines


@dataclass(frozen=True)
class Lines:
    """The lines of a batch of files, numbered, and how many lines each file has."""

    lines: DataFrame
    per_file: dict[str, int]


def read_lines(spark: SparkSession, paths: list[str]) -> Lines:
    """Every line of `paths` (source_file, line_number from 1, value), and lines per file.

    Spark reads files in parallel, split into blocks; a line's number is the count of lines in
    the earlier blocks of its file plus its position in its own block. Only one row per block
    is aggregated (and kept), so this stays distributed for files of any size (gzip files are
    one block); the parse that follows reads the text a second time, fused with the numbering.
    """
    lines = (
        spark.read.format("text")
        .load(paths)
        .select(
            F.col("_metadata.file_path").alias("_file_uri"),
            F.col("_metadata.file_block_start").alias("_block_start"),
            F.monotonically_increasing_id().alias("_row_id"),
            F.col("value"),
        )
    )
    blocks = lines.groupBy("_file_uri", "_block_start").agg(
        F.count(F.lit(1)).alias("_block_lines"), F.min("_row_id").alias("_block_first_row")
    )
    earlier_blocks = (
        W.partitionBy("_file_uri").orderBy("_block_start").rowsBetween(W.unboundedPreceding, -1)
    )
    earlier = F.sum("_block_lines").over(earlier_blocks)
    offsets = blocks.select(
        "_file_uri",
        "_block_start",
        "_block_first_row",
        "_block_lines",
        F.coalesce(earlier, F.lit(0)).alias("_lines_before"),
        _local_path(F.col("_file_uri")).alias("source_file"),
    ).localCheckpoint()
    per_file: dict[str, int] = {path: 0 for path in paths}
    for row in offsets.groupBy("source_file").agg(F.sum("_block_lines").alias("n")).collect():
        per_file[row["source_file"]] = int(row["n"])
    numbered = lines.join(
        F.broadcast(offsets.drop("_block_lines")), on=["_file_uri", "_block_start"], how="inner"
    ).select(
        "source_file",
        (F.col("_lines_before") + F.col("_row_id") - F.col("_block_first_row") + 1).alias(
            "line_number"
        ),
        F.col("value"),
    )
    return Lines(numbered, per_file)


def _local_path(uri: Column) -> Column:
    """file:///a%20b → /a b. A literal '+' in a URI is a '+' (spaces are %20), so keep it."""
    path = F.regexp_replace(uri, r"^file:(//)?", "")
    return F.url_decode(F.regexp_replace(path, r"\+", "%2B"))


def batches(files: list[InputFile], batch_bytes: int = BATCH_BYTES) -> list[list[InputFile]]:
    """Consecutive groups of whole files of about `batch_bytes` each (a big file alone)."""
    groups: list[list[InputFile]] = []
    size = 0
    for f in files:
        if not groups or (groups[-1] and size + f.size_bytes > batch_bytes):
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += f.size_bytes
    return groups
