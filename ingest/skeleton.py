"""One shape for every ingest: discover → new files → read → stage → write → reconcile → manifest.

Each kind of input (traces, logs, ZooKeeper captures) is a `Source` that plugs its parser into
this skeleton, so that what makes ingest fast and safe is written once:

- files are fingerprinted and skipped when the manifest already holds the same content;
- a batch of whole files is read once (numbered lines), parsed once by the source into a
  *staged* frame that is checkpointed, and every table is written from that frame with one
  `replaceWhere` on the batch's files (re-running after a crash or a change never doubles rows);
- one small aggregate of the staged frame gives every per-file and per-run count; the rows
  each write reports are checked against it, and the lines read against the lines staged;
- the tables of a batch are written side by side (their commits overlap), the manifest
  (`bronze.ingested_files`) last, so an interrupted batch is redone.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from ingest.files import (
    BATCH_BYTES,
    InputFile,
    batch_weights,
    batches,
    block_offsets,
    fingerprint,
    lines_per_file,
    number_lines,
    read_lines,
    source_path,
    staged_prefix,
)
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.local_frames import local_frame
from pulsar_audit.output import SparkProgress
from pulsar_audit.schemas import INGESTED_FILES
from pulsar_audit.spark import checkpointed, release, side_by_side
from pulsar_audit.storage import FileStat, FileStore, segments

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
# Columns every staged frame carries (besides what its source's outputs need):
#   source_file (raw-line sources: _file_uri, the file named per block after staging);
#   _table: the table the row goes to (null: not a record, e.g. a blank line);
#   _units: input lines the row stands for; _bad: its lines count as quarantined.
STAGED = ("source_file", "_table", "_units", "_bad")


@dataclass(frozen=True)
class Batch:
    files: list[InputFile]
    ingest_id: str
    at: datetime

    @property
    def paths(self) -> list[str]:
        """The files' recorded identities (what `source_file` holds)."""
        return [f.path for f in self.files]

    @property
    def uris(self) -> list[str]:
        """What Spark reads, in the order of `paths`."""
        return [f.read_as for f in self.files]


class Source(Protocol):
    """What one kind of input plugs into the skeleton."""

    tables: tuple[str, ...]  # every table the source writes, replaced per source file
    group_keys: tuple[str, ...]  # extra keys of the count rows (e.g. run_id)
    # True: `stage` gets raw positioned lines (no line_number, no source_file yet) and must
    # keep every line and the position columns; lines are numbered and their files named
    # from the persisted staged rows, per file block (a URI decoded for every row cost more
    # than the rest of a columnar row's parse: 5.3 against 2.9 s for 5.4 million rows, warm,
    # session 45), so the text is read once.
    # False: `stage` gets numbered lines (read twice; for small inputs whose parser needs
    # line order, like multi-line log entries).
    stages_raw_lines: bool

    def read(self, spark: SparkSession, batch: Batch) -> DataFrame:
        """The batch's raw positioned rows (read_raw_lines' columns; when stages_raw_lines)."""

    def kind_of(self, path: str) -> str:
        """The manifest kind of a file (e.g. 'trace', 'log:broker')."""

    def stage(self, lines: DataFrame, batch: Batch) -> DataFrame:
        """Lines (numbered; raw positioned lines when `stages_raw_lines`) → staged rows
        (STAGED columns, `_file_uri` in place of `source_file` for raw lines, plus what
        `output` needs)."""

    def measures(self) -> list[Column]:
        """Extra aggregates of the count rows (e.g. rule violations)."""

    def output(self, staged: DataFrame, table: str, batch: Batch) -> DataFrame:
        """The staged rows bound for `table`, as that table's contract rows."""

    def after_batch(self, lakehouse: Lakehouse, counts: list[Row], batch: Batch) -> None:
        """Anything the source does with the batch's count rows (e.g. judge them)."""


@dataclass
class FileCounts:
    records: int = 0
    accepted: int = 0
    quarantined: int = 0


@dataclass
class IngestOutcome:
    """What one ingest call did: files taken and skipped, and the count rows of each batch."""

    files: int = 0
    skipped_files: int = 0
    per_file: dict[str, FileCounts] = field(default_factory=dict)
    counts: list[Row] = field(default_factory=list)
    seconds: float = 0.0

    def total(self, name: str) -> int:
        return sum(getattr(c, name) for c in self.per_file.values())

    def plus(self, other: IngestOutcome) -> IngestOutcome:
        """This outcome and `other`'s (another source's files) as one."""
        return IngestOutcome(
            files=self.files + other.files,
            skipped_files=self.skipped_files + other.skipped_files,
            per_file={**self.per_file, **other.per_file},
            counts=[*self.counts, *other.counts],
            seconds=round(self.seconds + other.seconds, 3),
        )


def wanted_by(suffixes: tuple[str, ...], exclude: tuple[str, ...] = ()) -> Callable[[str], bool]:
    """Whether a file name ends with one of `suffixes` and with none of `exclude`."""

    def wanted(name: str) -> bool:
        return name.endswith(suffixes) and not (exclude and name.endswith(exclude))

    return wanted


def discover(
    spark: SparkSession,
    root: str,
    suffixes: tuple[str, ...],
    exclude: tuple[str, ...] = (),
    listed: list[FileStat] | None = None,
) -> list[FileStat]:
    """Files under `root` (or `root` itself) ending with one of `suffixes`, sorted.

    root: a local path or any URI Hadoop's FileSystem reads (file:, dbfs:, s3a:, abfss: …).
    exclude: suffixes of files that belong to another kind of input (e.g. '.zk.jsonl').
    listed: `root`'s files when the caller has listed them already (one listing, many kinds).
    """
    wanted = wanted_by(suffixes, exclude)
    store = FileStore(spark)
    if listed is None:
        if store.is_file(str(root)):
            found = store.status(str(root))
            if not wanted(found.name):
                raise InputError(f"{root}: expected a file ending in {' or '.join(suffixes)}")
            refuse_unread([found.path])
            return [found]
        listed = store.list_files(str(root))
    found_files = [f for f in listed if wanted(f.name)]
    refuse_unread([f.path for f in found_files], store.normalize(str(root)))
    return found_files


def spark_skips(name: str) -> bool:
    """Whether Spark's file reads leave out a file of this name even when it is named: a
    Hadoop convention for metadata and hidden files (Spark's
    `HadoopFSUtils.shouldFilterOutPathName`)."""
    excluded = (name.startswith("_") and "=" not in name) or name.startswith(".")
    return excluded and not name.startswith(("_common_metadata", "_metadata"))


def hidden_folder(root: str, path: str) -> str | None:
    """The name of the first folder between the folder `root` and the file `path` under it
    that Spark's listings leave out (`spark_skips`), as `watch`'s file stream does; None when
    there is none (the folders above `root` do not count) or `path` is not under `root`."""
    base, parts = segments(root), segments(path)
    if parts[: len(base)] != base:
        return None
    return next((name for name in parts[len(base) : -1] if spark_skips(name)), None)


def refuse_unread(paths: Sequence[str], root: str | None = None) -> None:
    """An InputError naming the input files of `paths` that Spark would never read (their
    records would be taken in as none at all, silently) or, when `paths` were listed under
    the folder `root` (in the same form), that lie in a folder below it that Spark's listings
    and `watch` leave out: `analyze` would take them in where `watch` does not, and such a
    folder is mostly what a stopped write leaves (a `_*.parquet.tmp` staging folder of the
    columnar trace, a `_temporary` one of Spark's)."""
    unread = [p for p in paths if spark_skips(p.rstrip("/").rsplit("/", 1)[-1])]
    if unread:
        raise InputError(
            f"{unread[0]}{_more(unread)}: a file whose name begins with '_' or '.' is never "
            "read by Spark (it takes such files for metadata or hidden ones); rename it, or "
            "move it out of the input folder"
        )
    if root is None:
        return
    hidden = [(p, folder) for p in paths if (folder := hidden_folder(root, p)) is not None]
    if hidden:
        path, folder = hidden[0]
        raise InputError(
            f"{path}{_more(hidden)}: it lies in the folder '{folder}', whose name begins with "
            f"'_' or '.': Spark's listings and `watch` leave such folders out; {_remedy(folder)}"
        )


def _remedy(folder: str) -> str:
    """What to do with a hidden folder of inputs: a columnar trace's write stopped midway
    (`ingest/traces.py:write_columnar`) left the rest of the trace in it, some parts already
    renamed beside it and the JSONL files it rewrites not yet removed: moving its parts out
    would read those records twice."""
    prefix = staged_prefix(folder)
    if prefix is not None:
        return (
            "a columnar trace's write stopped midway left it: remove it and the "
            f"{prefix}-NNNNN.parquet files beside it (the parts it had renamed), "
            "then write the trace again from its JSONL files (removed only once a write ends)"
        )
    return (
        "it holds metadata, or what a write that did not finish left (Spark's '_temporary'): "
        "remove it, or move the inputs it holds out of it"
    )


def _more(items: Sequence[object]) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


def new_files(
    lakehouse: Lakehouse,
    files: Sequence[FileStat],
    kind_of: Callable[[str], str],
    progress: Progress | None = None,
) -> list[InputFile]:
    """The files of `files` not yet ingested (same kind, path and content hash = done)."""
    if not files:
        return []
    kinds = sorted({kind_of(f.path) for f in files})
    seen: set[tuple[str, str, str]] = set()
    # the manifest is read only when its files' statistics allow one of these paths (a
    # watch's new files are not there: no Spark job, no snapshot of its newest version)
    if lakehouse.may_hold("ingested_files", [{"path": [f.path for f in files]}]):
        done = lakehouse.read("ingested_files").filter(F.col("kind").isin(kinds))
        seen = {
            (r.kind, r.path, r.content_hash)
            for r in done.select("kind", "path", "content_hash").collect()
        }
    store = FileStore(lakehouse.spark)
    new = []
    for number, file in enumerate(files, 1):
        fp = fingerprint(store, file)
        if (kind_of(fp.path), fp.path, fp.content_hash) not in seen:
            new.append(fp)
        if progress:
            progress(f"hashed {number}/{len(files)} files")
    return new


def ingest_files(
    lakehouse: Lakehouse,
    source: Source,
    files: Sequence[FileStat],
    progress: Progress | None = None,
) -> IngestOutcome:
    """Ingest the files of `files` that are new, batch by batch, through `source`."""
    # one job at a time decides what is new and takes it in (see pulsar_audit/locks.py)
    with lakehouse.exclusive("ingest"):
        return _ingest_new_files(lakehouse, source, files, progress)


def _ingest_new_files(
    lakehouse: Lakehouse,
    source: Source,
    files: Sequence[FileStat],
    progress: Progress | None,
) -> IngestOutcome:
    started = time.monotonic()
    say = progress or (lambda _: None)
    new = new_files(lakehouse, files, source.kind_of, progress)
    outcome = IngestOutcome(files=len(new), skipped_files=len(files) - len(new))
    total_bytes = sum(f.size_bytes for f in new)
    done_bytes = 0
    for group in batches(new, BATCH_BYTES, batch_weights(lakehouse.spark, new, BATCH_BYTES)):
        at = datetime.now(UTC).replace(tzinfo=None)
        batch = Batch(group, batch_ingest_id(source.kind_of(group[0].path), group), at)
        label = (
            f"ingest {source.kind_of(group[0].path)}: {len(outcome.per_file) + len(group)}"
            f"/{len(new)} files, {(done_bytes + sum(f.size_bytes for f in group)) >> 20}"
            f"/{total_bytes >> 20} MB"
        )
        with SparkProgress(lakehouse.spark, progress, label):
            per_file, counts = _ingest_batch(lakehouse, source, batch)
        outcome.per_file.update(per_file)
        outcome.counts.extend(counts)
        done_bytes += sum(f.size_bytes for f in group)
        records = outcome.total("records")
        elapsed = max(time.monotonic() - started, 1e-9)
        eta = elapsed * (total_bytes - done_bytes) / max(done_bytes, 1)
        say(
            f"ingested {len(outcome.per_file)}/{len(new)} files, {records:,} records "
            f"({records / elapsed:,.0f} records/s), ETA {eta:.0f} s"
        )
    outcome.seconds = round(time.monotonic() - started, 3)
    return outcome


def batch_ingest_id(kind: str, files: list[InputFile]) -> str:
    """The ingest id of a batch: a UUID derived from its files' paths and content hashes.

    An interrupted batch is redone with the same files (its manifest rows were never
    written), so the redo carries the same id and replaces exactly what the first try wrote.
    """
    names = "\n".join(f"{f.path}\t{f.content_hash}" for f in sorted(files, key=lambda f: f.path))
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pulsar-audit:{kind}\n{names}"))


def _ingest_batch(
    lakehouse: Lakehouse, source: Source, batch: Batch
) -> tuple[dict[str, FileCounts], list[Row]]:
    spark, paths = lakehouse.spark, batch.paths
    staged = offsets = None  # released however the batch ends, once they are kept
    try:
        if source.stages_raw_lines:
            # on disk, not in memory first: the staged rows of a batch of many records do not
            # fit in a local driver's memory (a 10^6-message columnar trace, one batch of 5.4
            # million records: one partition of 2.6 million rows held 1,576 MB as objects, the
            # other spilled), so Spark kept part of them as objects and wrote the rest to disk
            # anyway; serialized straight to disk, that trace's ingest took 101.5 -> 84.7 s
            # (three processes each, alternated; JSONL, whose batches hold fewer records:
            # unchanged; docs/performance.md, "Session 49")
            staged = checkpointed(
                source.stage(source.read(spark, batch), batch), StorageLevel.DISK_ONLY
            )
            offsets = block_offsets(staged)
            lines_read = lines_per_file(offsets, paths)
            numbered = number_lines(staged, offsets)
            file_key = "_file_uri"
        else:
            read = read_lines(spark, batch.uris, paths)
            offsets = read.offsets
            staged = numbered = checkpointed(source.stage(read.lines, batch))
            lines_read = read.per_file
            file_key = "source_file"
        keys = [file_key, "_table", *source.group_keys]
        counted = staged.groupBy(*keys).agg(
            F.count(F.lit(1)).alias("_rows"),
            F.sum("_units").alias("_units"),
            F.sum(F.when(F.col("_bad"), F.col("_units")).otherwise(0)).alias("_bad_units"),
            *source.measures(),
        )
        if file_key != "source_file":  # the file named once per count row, not per row
            counted = counted.withColumn("source_file", source_path(F.col(file_key)))
        counts = counted.drop("_file_uri").collect()

        staged_for = {row["_table"] for row in counts if row["_rows"]}

        def write(table: str) -> Callable[[], int]:
            # a table no row was staged for: its files' earlier rows (a batch redone) replaced
            # by none, without a pass over the staged rows (`reconcile` checks the write's
            # count against the staged counts either way)
            if table in staged_for:
                output = source.output(numbered, table, batch)
            else:
                output = local_frame(spark, [], lakehouse.spec(table).schema)
            return lambda: lakehouse.replace_where(table, output, {"source_file": paths})

        # every table of the batch, and what the source keeps of its counts, side by side:
        # different tables, so their Delta commits do not wait for each other
        *rows, _ = side_by_side(
            *(write(table) for table in source.tables),
            lambda: source.after_batch(lakehouse, counts, batch),
        )
        written = dict(zip(source.tables, rows, strict=True))
    finally:
        for kept in (offsets, staged):
            if kept is not None:
                release(kept)
    per_file = reconcile(lines_read, counts, written)
    _record_files(lakehouse, source, batch, per_file)
    return per_file, counts


def reconcile(
    lines_read: dict[str, int], counts: list[Row], written: dict[str, int]
) -> dict[str, FileCounts]:
    """Per file: records, accepted and quarantined, after checking nothing was lost or doubled.

    Fails loudly when a file's staged rows do not hold exactly the lines read from it, or when
    a table's write reports another number of rows than were staged for it.
    """
    per_file = {path: FileCounts() for path in lines_read}
    held = dict.fromkeys(lines_read, 0)
    staged_rows: dict[str, int] = {}
    for row in counts:
        path, table = row["source_file"], row["_table"]
        held[path] = held.get(path, 0) + row["_units"]
        if table is None:
            continue
        staged_rows[table] = staged_rows.get(table, 0) + row["_rows"]
        file_counts = per_file.setdefault(path, FileCounts())
        file_counts.records += row["_units"]
        file_counts.quarantined += row["_bad_units"]
        file_counts.accepted += row["_units"] - row["_bad_units"]
    for path, n in lines_read.items():
        if held.get(path, 0) != n:
            raise RuntimeError(
                f"ingest of {path} does not reconcile: read {n} lines, staged rows hold "
                f"{held.get(path, 0)}"
            )
    for table, rows in written.items():
        if rows != staged_rows.get(table, 0):
            raise RuntimeError(
                f"ingest does not reconcile: {staged_rows.get(table, 0)} rows staged for "
                f"{table}, the write reported {rows}"
            )
    return per_file


def _record_files(
    lakehouse: Lakehouse, source: Source, batch: Batch, per_file: dict[str, FileCounts]
) -> None:
    """Manifest rows, written last: a batch that did not finish is ingested again next time."""
    rows = [
        (
            source.kind_of(f.path),
            f.path,
            f.content_hash,
            f.size_bytes,
            per_file[f.path].records,
            per_file[f.path].accepted,
            per_file[f.path].quarantined,
            batch.ingest_id,
            batch.at,
        )
        for f in batch.files
    ]
    # only files the manifest does not hold were taken in (`new_files`, under the ingest
    # lock): their rows are new keys, appended
    lakehouse.append("ingested_files", local_frame(lakehouse.spark, rows, INGESTED_FILES))
