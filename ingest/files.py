"""Finding input files, fingerprinting them, and reading their lines with line numbers in Spark."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError

_CHUNK = 1 << 20
BATCH_BYTES = 1 << 30
Progress = Callable[[str], None]


@dataclass(frozen=True)
class InputFile:
    path: str
    size_bytes: int
    content_hash: str


def discover(
    root: str | Path, suffixes: tuple[str, ...], exclude: tuple[str, ...] = ()
) -> list[Path]:
    """Files under `root` (or `root` itself) ending with one of `suffixes`, sorted.

    exclude: suffixes of files that belong to another kind of input (e.g. '.zk.jsonl').
    """
    root = Path(root)
    if not root.exists():
        raise InputError(f"{root}: no such file or directory")

    def wanted(name: str) -> bool:
        return name.endswith(suffixes) and not (exclude and name.endswith(exclude))

    if root.is_file():
        if not wanted(root.name):
            raise InputError(f"{root}: expected a file ending in {' or '.join(suffixes)}")
        return [root.resolve()]
    return sorted(p.resolve() for p in root.rglob("*") if p.is_file() and wanted(p.name))


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


def new_files(
    lakehouse: Lakehouse, kind: str, paths: list[Path], progress: Progress | None = None
) -> list[InputFile]:
    """The files of `paths` not yet ingested as `kind` (same path and content hash = done)."""
    done = lakehouse.read("ingested_files").filter(F.col("kind") == kind)
    seen = {(r.path, r.content_hash) for r in done.select("path", "content_hash").collect()}
    new = []
    for number, path in enumerate(paths, 1):
        fp = fingerprint(path)
        if (fp.path, fp.content_hash) not in seen:
            new.append(fp)
        if progress:
            progress(f"hashed {number}/{len(paths)} files")
    return new


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
