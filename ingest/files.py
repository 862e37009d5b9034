"""Input files: fingerprints, batches of whole files, and their lines numbered in Spark."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import Window as W
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from pulsar_audit.errors import InputError
from pulsar_audit.spark import file_text_bytes
from pulsar_audit.storage import FileStat, FileStore

BATCH_BYTES = 1 << 30
# What a record of the columnar form counts as in a batch (`batch_weights`): a batch of it holds
# at most some 33 million records (JSONL's, at about 280 bytes a line: 3.8 million)
COLUMNAR_RECORD_BYTES = 32


@dataclass(frozen=True)
class InputFile:
    """A file to ingest: its recorded identity `path`, size, content hash, and the `uri` read."""

    path: str
    size_bytes: int
    content_hash: str
    uri: str = ""

    @property
    def read_as(self) -> str:
        return self.uri or self.path


def fingerprint(store: FileStore, file: FileStat) -> InputFile:
    """Size and SHA-256 of the file's bytes (streamed; the file is never held in memory)."""
    return InputFile(file.path, file.size_bytes, store.sha256(file), file.uri)


@dataclass(frozen=True)
class Lines:
    """The lines of a batch of files, numbered, and how many lines each file has.

    offsets: the checkpointed `block_offsets` that `lines` is numbered by (release it once
    `lines` has been read for the last time or kept by a checkpoint of its own).
    """

    lines: DataFrame
    per_file: dict[str, int]
    offsets: DataFrame


def read_lines(spark: SparkSession, uris: list[str], paths: list[str] | None = None) -> Lines:
    """Every line of `uris` (source_file, line_number from 1, value), and lines per file.

    paths: the files' recorded identities, in the order of `uris` (default: `uris` themselves);
    `source_file` holds them (see `source_path`).

    The text is read twice: once to count each block's lines (a tiny aggregate), then again
    by whatever consumes `lines`. Sources that stage the raw lines first (traces) number them
    after staging instead, from the staged rows (see `number_lines`), and read the text once.
    """
    raw = read_raw_lines(spark, uris)
    offsets = block_offsets(raw)
    numbered = number_lines(raw, offsets).select("source_file", "line_number", "value")
    return Lines(numbered, lines_per_file(offsets, paths or uris), offsets)


def read_raw_lines(spark: SparkSession, uris: list[str]) -> DataFrame:
    """Every line of `uris` with its position: _file_uri, _block_start, _row_id, value.

    Spark reads files in parallel, split into blocks; `_row_id` grows with the line within a
    partition, so (_block_start, _row_id) orders a file's lines.
    """
    return (
        spark.read.format("text")
        .load(uris)
        .select(
            F.col("_metadata.file_path").alias("_file_uri"),
            F.col("_metadata.file_block_start").alias("_block_start"),
            F.monotonically_increasing_id().alias("_row_id"),
            F.col("value"),
        )
    )


def read_raw_rows(spark: SparkSession, uris: list[str], schema: StructType) -> DataFrame:
    """Every row of the Parquet files `uris`, positioned as read_raw_lines positions lines:
    _file_uri, _block_start, _row_id, then `schema`'s columns (null where a file has none).

    A Parquet file is split by row groups; its rows keep their order within a split, so
    (_block_start, _row_id) orders them and `number_lines` numbers them from 1.
    """
    return (
        spark.read.schema(schema)
        .parquet(*uris)
        .select(
            F.col("_metadata.file_path").alias("_file_uri"),
            F.col("_metadata.file_block_start").alias("_block_start"),
            F.monotonically_increasing_id().alias("_row_id"),
            *schema.names,
        )
    )


# The folder a columnar trace's write stages its part files in before renaming them into
# `<prefix>-NNNNN.parquet` beside it (`ingest/traces.py:write_columnar`): hidden, so that a
# write stopped midway is never read as a folder of inputs.
STAGING_SUFFIX = ".parquet.tmp"


def columnar_staging(prefix: str) -> str:
    """The staging folder's name of a columnar write of `prefix`."""
    return f"_{prefix}{STAGING_SUFFIX}"


def staged_prefix(folder: str) -> str | None:
    """The prefix whose columnar write stages in a folder of this name, else None."""
    staged = folder.startswith("_") and folder.endswith(STAGING_SUFFIX)
    return (folder[1 : -len(STAGING_SUFFIX)] if staged else "") or None


def parquet_schema(spark: SparkSession, file: InputFile) -> StructType:
    """The columns and types Spark reads from the Parquet file `file`: its footer read on the
    driver and turned into a Spark schema by Spark's own converter with the session's
    settings (those `spark.read.parquet(uri).schema` uses; that read also makes every column
    nullable, which this does not).

    Without the Spark job and listing such a read starts (0.13 s a file here, seconds for a
    run's tens of files). A file Parquet's reader or Spark's converter refuses (not Parquet,
    a type Spark does not read) is an InputError naming it and what was found. On a Spark
    whose internals differ (its footer reader or converter not found), Spark's read instead.
    """
    try:
        return _schema(spark, file.read_as)
    except (Py4JJavaError, CapturedException) as exc:
        raise InputError(
            f"{file.path}: cannot be read as Parquet (a columnar trace file): {_first_line(exc)}"
        ) from exc


def _schema(spark: SparkSession, uri: str) -> StructType:
    """From the footer; by Spark's read where Spark's internals are not found (a JVM error
    from either is the file's: raised)."""
    try:
        return _footer_schema(spark, uri)
    except Py4JJavaError:
        raise
    except (Py4JError, TypeError):
        return spark.read.parquet(uri).schema


def _footer_schema(spark: SparkSession, uri: str) -> StructType:
    jvm, session = spark._jvm, spark._jsparkSession  # noqa: SLF001
    parquet = jvm.org.apache.spark.sql.execution.datasources.parquet
    state = session.sessionState()
    path = jvm.org.apache.hadoop.fs.Path(uri)
    metadata_filters = jvm.org.apache.parquet.format.converter.ParquetMetadataConverter
    footer = parquet.ParquetFooterReader.readFooter(
        state.newHadoopConf(), path, metadata_filters.SKIP_ROW_GROUPS
    )
    schema = parquet.ParquetFileFormat.readSchemaFromFooter(
        jvm.org.apache.parquet.hadoop.Footer(path, footer),
        parquet.ParquetToSparkSchemaConverter(state.conf()),
    )
    return StructType.fromJson(json.loads(schema.json()))


def _first_line(exc: Exception) -> str:
    """The first line of what the JVM said (a Py4JJavaError's Java message, else the text)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage() or java.toString()) if java is not None else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]


def block_offsets(raw: DataFrame) -> DataFrame:
    """One row per file block: its lines, first row id and lines in the file's earlier blocks.

    `raw` must hold every line of its files (read_raw_lines, or a persisted frame staged from
    it that kept every line). The result is small and checkpointed.
    """
    blocks = raw.groupBy("_file_uri", "_block_start").agg(
        F.count(F.lit(1)).alias("_block_lines"), F.min("_row_id").alias("_block_first_row")
    )
    earlier_blocks = (
        W.partitionBy("_file_uri").orderBy("_block_start").rowsBetween(W.unboundedPreceding, -1)
    )
    earlier = F.sum("_block_lines").over(earlier_blocks)
    return blocks.select(
        "_file_uri",
        "_block_start",
        "_block_first_row",
        "_block_lines",
        F.coalesce(earlier, F.lit(0)).alias("_lines_before"),
        source_path(F.col("_file_uri")).alias("source_file"),
    ).localCheckpoint()


def number_lines(raw: DataFrame, offsets: DataFrame) -> DataFrame:
    """Add source_file and line_number (1-based) to rows positioned by read_raw_lines."""
    line_number = F.col("_lines_before") + F.col("_row_id") - F.col("_block_first_row") + 1
    drop = ["_block_lines", *(["source_file"] if "source_file" in raw.columns else [])]
    return (
        raw.join(
            F.broadcast(offsets.drop(*drop)),
            on=["_file_uri", "_block_start"],
            how="inner",
        )
        .withColumn("line_number", line_number)
        .drop("_lines_before", "_block_first_row")
    )


def lines_per_file(offsets: DataFrame, paths: list[str]) -> dict[str, int]:
    """Lines read from each of `paths` (0 for an empty file), from the small offsets frame."""
    per_file: dict[str, int] = dict.fromkeys(paths, 0)
    for row in offsets.groupBy("source_file").agg(F.sum("_block_lines").alias("n")).collect():
        per_file[row["source_file"]] = int(row["n"])
    return per_file


def source_path(uri: Column) -> Column:
    """The recorded identity of a file Spark read (pulsar_audit.storage): file:///a%20b → /a b,
    s3a://b/a%20b → s3a://b/a b. A literal '+' in a URI is a '+' (spaces are %20), so keep it.
    """
    path = F.regexp_replace(uri, r"^file:(//)?", "")
    return F.url_decode(F.regexp_replace(path, r"\+", "%2B"))


def batches(
    files: list[InputFile],
    batch_bytes: int = BATCH_BYTES,
    weights: Sequence[int] | None = None,
) -> list[list[InputFile]]:
    """Consecutive groups of whole files of about `batch_bytes` each (a big file alone).

    weights: what each file of `files` counts as (`batch_weights`); default its size."""
    sizes = [f.size_bytes for f in files] if weights is None else weights
    groups: list[list[InputFile]] = []
    size = 0
    for f, weight in zip(files, sizes, strict=True):
        if not groups or (groups[-1] and size + weight > batch_bytes):
            groups.append([])
            size = 0
        groups[-1].append(f)
        size += weight
    return groups


def batch_weights(
    spark: SparkSession, files: Sequence[InputFile], batch_bytes: int = BATCH_BYTES
) -> list[int]:
    """What each file counts as when `files` are cut into batches: its size in bytes; a gzip
    file the text it holds (its trailer's record, `file_text_bytes`), so that a batch of
    `.jsonl.gz` holds about the lines of a plain JSONL batch, not some eight times as many
    (the staged rows of a batch go to disk and are written before its commit); a Parquet
    file (the trace's columnar form) its records times COLUMNAR_RECORD_BYTES, from its footer.

    Parquet's bytes say little of its records: the simulator's 10^8-message trace takes 12.2
    bytes a record in its first run's files (280 million records in 3.4 GB) and 6.5 in its
    largest files (500,000 records in 3.2 MB), so that cut by bytes its first two runs made
    batches of up to 117 million records, some 30 times a JSONL batch's, each staged on disk
    and written before its commit (10^6 messages: 5.4 million records in 73 MB).
    Footers are read only when the Parquet files could hold more than a batch at one byte a
    record (traces take 6.5 to 15 here; a file below that only makes a larger batch): a
    watch's micro-batch of small files reads none. A footer that cannot be read leaves the
    file at its size (its read then fails with the file's own error)."""
    sizes = [
        file_text_bytes(f.read_as, f.size_bytes) if f.path.endswith(".gz") else f.size_bytes
        for f in files
    ]
    parquet = [i for i, f in enumerate(files) if f.path.endswith(".parquet")]
    if sum(sizes[i] for i in parquet) * COLUMNAR_RECORD_BYTES <= batch_bytes:
        return sizes
    count = _parquet_records(spark)
    for i in parquet:
        records = count(files[i])
        if records is not None:
            sizes[i] = records * COLUMNAR_RECORD_BYTES
    return sizes


def _parquet_records(spark: SparkSession) -> Callable[[InputFile], int | None]:
    """A function of a Parquet file: its records, summed over the row groups of its footer;
    None when the footer cannot be read (or the JVM has no such reader)."""
    jvm, session = spark._jvm, spark._jsparkSession  # noqa: SLF001
    conf = session.sessionState().newHadoopConf()

    def records(file: InputFile) -> int | None:
        try:
            reader = jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetFooterReader
            footer = reader.readFooter(
                conf,
                jvm.org.apache.hadoop.fs.Path(file.read_as),
                jvm.org.apache.parquet.format.converter.ParquetMetadataConverter.NO_FILTER,
            )
            blocks = footer.getBlocks()
            return sum(blocks.get(i).getRowCount() for i in range(blocks.size()))
        except (Py4JError, CapturedException, TypeError):  # TypeError: a class not found
            return None

    return records
