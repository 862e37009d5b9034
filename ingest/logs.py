"""`ingest logs`: broker, bookie and client log files → bronze broker_log / bookie_log / client_log.

Every line lands in bronze: in a parsed entry (stack traces and other continuation lines stay
with the entry above them) or in a row of its own with `parse_error`. Incremental like trace
ingest: the manifest (bronze.ingested_files, kind `log:<source>`) skips a file already taken
in with the same content; a changed file's rows are replaced in one Delta commit.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingest.files import InputFile, Progress, batches, discover, new_files, read_numbered_lines
from ingest.log_format import parse_log_lines
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import UsageError
from pulsar_audit.schemas import INGESTED_FILES, LOG_LINES, conform

log = logging.getLogger(__name__)

SOURCE_TABLE = {"broker": "broker_log", "bookie": "bookie_log", "client": "client_log"}
LOG_SUFFIXES = (".log", ".log.gz", ".out")

# bin/pulsar-daemon names its files pulsar-<command>-<hostname>.log
_DAEMON_FILE = re.compile(
    r"^pulsar-(?:broker|bookie|standalone|zookeeper|autorecovery|proxy|functions-worker)-(.+)$"
)
_ROTATION = re.compile(r"(\.\d+|\.\d{4}-\d\d-\d\d(-\d+)?|-\d{4}-\d\d-\d\d-\d+)$")


@dataclass
class LogIngestReport:
    source: str
    table: str
    files: int = 0
    skipped_files: int = 0
    lines: int = 0
    entries: int = 0
    parse_errors: int = 0
    timestamp_zone: str = "UTC"
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def host_from_filename(path: str | Path) -> str:
    """The host a log file came from, by its name: pulsar-broker-<host>.log → <host>."""
    name = Path(path).name
    for suffix in (".gz", ".log", ".txt", ".out"):
        name = name.removesuffix(suffix)
    name = _ROTATION.sub("", name).removesuffix(".log")
    daemon = _DAEMON_FILE.match(name)
    return daemon.group(1) if daemon else name


def ingest_logs(
    lakehouse: Lakehouse,
    path: str | Path,
    source: str,
    host: str | None = None,
    progress: Progress | None = None,
    zone: str = "UTC",
) -> LogIngestReport:
    """Ingest every new log file under `path` as `source` (broker, bookie or client).

    host: the host of every file (default: from each file's name). zone: time zone of
    timestamps written without an offset (BookKeeper's own layout, the C++ client).
    """
    if source not in SOURCE_TABLE:
        raise UsageError(f"unknown log source {source!r}; expected one of {sorted(SOURCE_TABLE)}")
    started = time.monotonic()
    say = progress or (lambda _: None)
    kind = f"log:{source}"
    paths = discover(path, LOG_SUFFIXES)
    new = new_files(lakehouse, kind, paths)
    report = LogIngestReport(source, SOURCE_TABLE[source], len(new), len(paths) - len(new))
    report.timestamp_zone = zone
    for batch in batches(new):
        hosts = {f.path: host or host_from_filename(f.path) for f in batch}
        counts = _ingest_batch(lakehouse, batch, source, hosts, zone, kind)
        for key in ("lines", "entries", "parse_errors"):
            setattr(report, key, getattr(report, key) + counts[key])
        say(f"ingested {report.files} {source} log files, {report.lines} lines")
    report.seconds = round(time.monotonic() - started, 3)
    log.info("ingest logs: %s", report.as_dict())
    return report


def with_lineage(
    entries: DataFrame, source: str, hosts: dict[str, str], ingest_id: str, at: datetime
) -> DataFrame:
    """Add source, host (looked up per file), ingest_id and ingested_at; select LOG_LINES."""
    host_of = F.create_map(*[F.lit(x) for pair in sorted(hosts.items()) for x in pair])
    rows = entries.withColumns(
        {
            "source": F.lit(source),
            "host": F.coalesce(F.element_at(host_of, F.col("source_file")), F.lit("unknown")),
            "ingest_id": F.lit(ingest_id),
            "ingested_at": F.lit(at).cast("timestamp"),
        }
    )
    return conform(rows, LOG_LINES)


def _ingest_batch(
    lakehouse: Lakehouse,
    files: list[InputFile],
    source: str,
    hosts: dict[str, str],
    zone: str,
    kind: str,
) -> dict[str, int]:
    table = SOURCE_TABLE[source]
    ingest_id = str(uuid.uuid4())
    at = datetime.now(UTC).replace(tzinfo=None)
    paths = [f.path for f in files]
    lines = read_numbered_lines(lakehouse.spark, paths).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = lines.transform(parse_log_lines, zone).transform(
            with_lineage, source, hosts, ingest_id, at
        )
        lakehouse.replace_where(table, rows, {"source_file": paths})
        per_file = _reconcile(lakehouse, table, lines, paths)
    finally:
        lines.unpersist()
    _record_files(lakehouse, kind, files, per_file, ingest_id, at)
    return {k: sum(c[k] for c in per_file.values()) for k in ("lines", "entries", "parse_errors")}


def _reconcile(
    lakehouse: Lakehouse, table: str, lines: DataFrame, paths: list[str]
) -> dict[str, dict[str, int]]:
    """Per file: lines read, rows written, and lines held by rows with a parse_error.

    Fails loudly unless the rows now in the table hold exactly the lines read.
    """
    read = {r.source_file: r["count"] for r in lines.groupBy("source_file").count().collect()}
    held = F.size(F.split(F.col("raw"), "\n"))
    stored = (
        lakehouse.read(table)
        .filter(F.col("source_file").isin(paths))
        .groupBy("source_file")
        .agg(
            F.sum(held).alias("lines"),
            F.count(F.lit(1)).alias("entries"),
            F.sum(F.when(F.col("parse_error").isNotNull(), held).otherwise(0)).alias("bad"),
            F.sum(F.col("parse_error").isNotNull().cast("long")).alias("parse_errors"),
        )
        .collect()
    )
    per_file = {p: {"lines": 0, "entries": 0, "bad_lines": 0, "parse_errors": 0} for p in paths}
    for r in stored:
        per_file[r.source_file] = {
            "lines": r.lines,
            "entries": r.entries,
            "bad_lines": r.bad,
            "parse_errors": r.parse_errors,
        }
    for path in paths:
        if per_file[path]["lines"] != read.get(path, 0):
            raise RuntimeError(
                f"log ingest of {path} does not reconcile: read {read.get(path, 0)} lines, "
                f"{table} holds {per_file[path]['lines']}"
            )
    return per_file


def _record_files(
    lakehouse: Lakehouse,
    kind: str,
    files: list[InputFile],
    per_file: dict[str, dict[str, int]],
    ingest_id: str,
    at: datetime,
) -> None:
    """Manifest rows, written last. records = lines; quarantined = lines kept with a parse_error."""
    rows = []
    for f in files:
        counts = per_file[f.path]
        bad = counts["bad_lines"]
        rows.append(
            (kind, f.path, f.content_hash, f.size_bytes, counts["lines"], counts["lines"] - bad)
            + (bad, ingest_id, at)
        )
    lakehouse.merge("ingested_files", lakehouse.spark.createDataFrame(rows, INGESTED_FILES))
