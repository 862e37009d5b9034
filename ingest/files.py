"""Finding input files, fingerprinting them, and reading their lines with line numbers in Spark."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.errors import InputError

_CHUNK = 1 << 20


@dataclass(frozen=True)
class InputFile:
    path: str
    size_bytes: int
    content_hash: str


def discover(root: str | Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Files under `root` (or `root` itself) whose names end with one of `suffixes`, sorted."""
    root = Path(root)
    if not root.exists():
        raise InputError(f"{root}: no such file or directory")
    if root.is_file():
        if not root.name.endswith(suffixes):
            raise InputError(f"{root}: expected a file ending in {' or '.join(suffixes)}")
        return [root.resolve()]
    return sorted(p.resolve() for p in root.rglob("*") if p.is_file() and p.name.endswith(suffixes))


def fingerprint(path: Path) -> InputFile:
    """Size and SHA-256 of the file's bytes (streamed; the file is never held in memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return InputFile(str(path), path.stat().st_size, digest.hexdigest())


def read_numbered_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """One row per line of `paths`: source_file, line_number (1-based), value.

    Spark reads files in parallel, split into blocks; a line's number is the count of lines in
    the earlier blocks of its file plus its position in its own block. Only one row per block
    is aggregated, so this stays distributed for files of any size (gzip files are one block).
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
        F.coalesce(earlier, F.lit(0)).alias("_lines_before"),
    )
    return lines.join(F.broadcast(offsets), on=["_file_uri", "_block_start"], how="inner").select(
        _local_path(F.col("_file_uri")).alias("source_file"),
        (F.col("_lines_before") + F.col("_row_id") - F.col("_block_first_row") + 1).alias(
            "line_number"
        ),
        F.col("value"),
    )


def _local_path(uri: Column) -> Column:
    """file:///a%20b → /a b. A literal '+' in a URI is a '+' (spaces are %20), so keep it."""
    path = F.regexp_replace(uri, r"^file:(//)?", "")
    return F.url_decode(F.regexp_replace(path, r"\+", "%2B"))
