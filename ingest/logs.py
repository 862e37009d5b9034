"""`ingest logs`: broker, bookie and client log files → bronze broker_log / bookie_log / client_log.

Every line lands in bronze: in a parsed entry (stack traces and other continuation lines stay
with the entry above them) or in a row of its own with `parse_error`. Incremental like trace
ingest: the manifest (bronze.ingested_files, kind `log:<source>`) skips a file already taken
in with the same content; a changed file's rows are replaced in one Delta commit.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from ingest.log_format import parse_log_lines
from ingest.skeleton import Batch, Progress, discover, ingest_files
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import UsageError
from pulsar_audit.schemas import LOG_LINES, conform
from pulsar_audit.storage import FileStat

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
    name = str(path).rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".log", ".txt", ".out"):
        name = name.removesuffix(suffix)
    name = _ROTATION.sub("", name).removesuffix(".log")
    daemon = _DAEMON_FILE.match(name)
    return daemon.group(1) if daemon else name


class LogSource:
    """Log files of one or more sources (broker, bookie, client) → their bronze log tables.

    Every line lands: in an entry (continuation lines stay with the entry above them) or in a
    row of its own with `parse_error`; a file's lines read = lines its rows hold.
    """

    stages_raw_lines = False
    group_keys: tuple[str, ...] = ()

    def __init__(self, sources: dict[str, str], hosts: dict[str, str], zone: str):
        self.sources = sources  # path → broker | bookie | client
        self.hosts = hosts  # path → host
        self.zone = zone
        self.tables = tuple(sorted({SOURCE_TABLE[s] for s in sources.values()}))

    def kind_of(self, path: str) -> str:
        return f"log:{self.sources[path]}"

    def stage(self, lines: DataFrame, batch: Batch) -> DataFrame:
        table = _per_file({p: SOURCE_TABLE[s] for p, s in self.sources.items()})
        return parse_log_lines(lines, self.zone).withColumns(
            {
                "_table": table,
                "_units": F.col("lines"),
                "_bad": F.col("parse_error").isNotNull(),
            }
        )

    def measures(self) -> list[Column]:
        return [F.sum(F.col("parse_error").isNotNull().cast("long")).alias("parse_errors")]

    def output(self, staged: DataFrame, table: str, batch: Batch) -> DataFrame:
        rows = staged.filter(F.col("_table") == table)
        return with_lineage(rows, self.sources, self.hosts, batch.ingest_id, batch.at)

    def after_batch(self, lakehouse: Lakehouse, counts: list[Row], batch: Batch) -> None:
        return None


def with_lineage(
    entries: DataFrame,
    source: str | dict[str, str],
    hosts: dict[str, str],
    ingest_id: str,
    at: datetime,
) -> DataFrame:
    """Add source (one for all, or per file), host (per file), ingest_id and ingested_at;
    select LOG_LINES."""
    rows = entries.withColumns(
        {
            "source": F.lit(source) if isinstance(source, str) else _per_file(source),
            "host": F.coalesce(_per_file(hosts), F.lit("unknown")),
            "ingest_id": F.lit(ingest_id),
            "ingested_at": F.lit(at).cast("timestamp"),
        }
    )
    return conform(rows, LOG_LINES)


def _per_file(values: dict[str, str]) -> Column:
    """The value for the row's source_file, from a small path → value map."""
    mapping = F.create_map(*[F.lit(x) for pair in sorted(values.items()) for x in pair])
    return F.element_at(mapping, F.col("source_file"))


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
    reports = ingest_log_folders(lakehouse, {source: [path]}, host, progress, zone)
    return reports[source]


def ingest_log_folders(
    lakehouse: Lakehouse,
    folders: dict[str, list[str]],
    host: str | None = None,
    progress: Progress | None = None,
    zone: str = "UTC",
) -> dict[str, LogIngestReport]:
    """Ingest the new log files of several sources at once (one pass, one manifest write).

    folders: source → files or folders of that source's logs.
    """
    files = {
        source: [f for place in places for f in discover(lakehouse.spark, str(place), LOG_SUFFIXES)]
        for source, places in folders.items()
    }
    return ingest_log_files(lakehouse, files, host, progress, zone)


def ingest_log_files(
    lakehouse: Lakehouse,
    files: dict[str, list[FileStat]],
    host: str | None = None,
    progress: Progress | None = None,
    zone: str = "UTC",
) -> dict[str, LogIngestReport]:
    """Ingest the new ones of already listed log files, per source (see ingest_log_folders)."""
    sources = {f.path: source for source, listed in files.items() for f in listed}
    found = {f.path: f for listed in files.values() for f in listed}
    hosts = {p: host or host_from_filename(p) for p in sources}
    log_source = LogSource(sources, hosts, zone)
    outcome = ingest_files(lakehouse, log_source, [found[p] for p in sorted(found)], progress)
    reports = {s: LogIngestReport(s, SOURCE_TABLE[s], timestamp_zone=zone) for s in files}
    taken = set(outcome.per_file)
    for path, source in sources.items():
        report = reports[source]
        if path in taken:
            report.files += 1
            report.lines += outcome.per_file[path].records
        else:
            report.skipped_files += 1
    for row in outcome.counts:
        source = sources[row["source_file"]]
        reports[source].entries += row["_rows"]
        reports[source].parse_errors += row["parse_errors"]
    for report in reports.values():
        report.seconds = outcome.seconds
        log.info("ingest logs: %s", report.as_dict())
    return reports
