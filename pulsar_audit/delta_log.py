"""A local Delta table's log, read and started without Spark: its version, a new table's first
commit, and what an interrupted creation left.

The first commit is what Delta's `CREATE TABLE` writes for a table without partitions
(protocol 1/2, the schema as Spark's JSON, the table's properties): the Delta protocol's
version-0 file, created atomically (a hard link that fails if another job made it first).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql.types import StructType

from pulsar_audit.config import Config
from pulsar_audit.schemas import TABLES

log = logging.getLogger(__name__)

FIRST_COMMIT = "00000000000000000000.json"


def local_versions(config: Config, tables: Iterable[str]) -> dict[str, int]:
    """The version of each table of a local (path) lakehouse, -1 if never written; no Spark."""
    root = config.lakehouse_path
    found = {t: log_version(root / TABLES[t].layer / TABLES[t].name) for t in tables}
    return {t: -1 if v is None else v for t, v in found.items()}


def create_local_table(
    table_path: Path, schema: StructType, properties: dict[str, str] | None = None
) -> bool:
    """Write version 0 of a new Delta table at `table_path` with its table `properties`;
    False if it already had one."""
    properties = dict(properties or {})
    clear_uncommitted_log(table_path)
    log_dir = table_path / "_delta_log"
    log_dir.mkdir(parents=True, exist_ok=True)
    if (log_dir / FIRST_COMMIT).exists():
        return False
    now = int(time.time() * 1000)
    txn_id = str(uuid.uuid4())
    parameters = {
        "partitionBy": "[]",
        "clusterBy": "[]",
        "description": None,
        "isManaged": "false",
        "properties": json.dumps(properties, separators=(",", ":")),
    }
    actions = [
        {
            "commitInfo": {
                "timestamp": now,
                "operation": "CREATE TABLE",
                "operationParameters": parameters,
                "isolationLevel": "Serializable",
                "isBlindAppend": True,
                "operationMetrics": {},
                "engineInfo": "pulsar-audit",
                "txnId": txn_id,
            }
        },
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": schema.json(),
                "partitionColumns": [],
                "configuration": properties,
                "createdTime": now,
            }
        },
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
    ]
    temporary = log_dir / f".{FIRST_COMMIT}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as out:
            out.write("".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions))
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, log_dir / FIRST_COMMIT)
        except FileExistsError:
            return False  # another job created it first: the same empty table
    finally:
        temporary.unlink(missing_ok=True)
    _write_checksum(log_dir, txn_id, actions[1]["metaData"], actions[2]["protocol"])
    return True


def _write_checksum(log_dir: Path, txn_id: str, metadata: dict, protocol: dict) -> None:
    """Version 0's checksum file, as Delta's CREATE TABLE writes it: with it, Delta takes the
    new table's protocol, metadata and (no) files from it instead of a Spark job that replays
    the log (about a second per table at its first write). Optional in the protocol: a job
    killed before it is written leaves a table Delta reads the slow way."""
    checksum = {
        "txnId": txn_id,
        "tableSizeBytes": 0,
        "numFiles": 0,
        "numMetadata": 1,
        "numProtocol": 1,
        "setTransactions": [],
        "domainMetadata": [],
        "metadata": metadata,
        "protocol": protocol,
        "allFiles": [],
    }
    name = FIRST_COMMIT.replace(".json", ".crc")
    temporary = log_dir / f".{name}.{uuid.uuid4().hex}.tmp"
    try:
        temporary.write_text(json.dumps(checksum, separators=(",", ":")), encoding="utf-8")
        os.replace(temporary, log_dir / name)
    finally:
        temporary.unlink(missing_ok=True)


def clear_uncommitted_log(table_path: Path) -> None:
    """Remove a `_delta_log` folder that holds no commit: what a creation left that failed
    (disk full) or was killed before its first commit. Delta takes any `_delta_log` folder for
    a table, so `createIfNotExists` would skip the creation and the table stay unreadable.
    It holds at most Hadoop's hidden temporary and checksum files and empty folders
    (`_staged_commits`).
    """
    log_dir = table_path / "_delta_log"
    if not log_dir.is_dir():
        return
    files = [p for p in log_dir.rglob("*") if not p.is_dir()]
    if any(not p.name.startswith(".") for p in files):
        return  # a commit, checkpoint or other file: a table, or not ours to clear
    log.warning("%s: removing a Delta log without any commit (an interrupted creation)", log_dir)
    shutil.rmtree(log_dir)


@dataclass(frozen=True)
class LocalTableState:
    """A local table's newest version; whether only its creation was committed (no data file
    was ever added), and then the schema it was created with."""

    version: int | None
    empty: bool
    schema: StructType | None = None


def local_table_state(table_path: Path) -> LocalTableState:
    """What the log of a local Delta table says of it, read without Spark."""
    version = log_version(table_path)
    if version != 0:
        return LocalTableState(version, False)
    with open(table_path / "_delta_log" / FIRST_COMMIT, encoding="utf-8") as first:
        actions = [json.loads(line) for line in first if line.strip()]
    if any("add" in action for action in actions):
        return LocalTableState(0, False)
    meta = next((a["metaData"] for a in actions if "metaData" in a), None)
    schema = StructType.fromJson(json.loads(meta["schemaString"])) if meta else None
    return LocalTableState(0, True, schema)


def log_version(table_path: Path) -> int | None:
    """The newest commit of a local Delta table (its highest `_delta_log/N.json`), or None."""
    try:
        names = os.listdir(table_path / "_delta_log")
    except FileNotFoundError:
        return None
    versions = [int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()]
    return max(versions) if versions else None


def checksum_files(table_path: Path, version: int) -> list[dict] | None:
    """The data files (Delta `add` actions: path, size, stats) of a local table at `version`,
    as that version's checksum file lists them; None when it does not (no checksum written,
    or a table of more files than Delta lists there: its `allFilesInCrc.thresholdNumFiles`).
    """
    name = f"{version:020d}.crc"
    try:
        with open(table_path / "_delta_log" / name, encoding="utf-8") as crc:
            checksum = json.load(crc)
    except (FileNotFoundError, ValueError):  # none, or one being written
        return None
    files = checksum.get("allFiles") if isinstance(checksum, dict) else None
    return files if isinstance(files, list) else None


def files_may_hold(
    files: list[dict], matches: Iterable[dict[str, list[str]]], strings: Iterable[str]
) -> bool:
    """Whether any of `files` (`checksum_files`) may hold a row that one of `matches` (column →
    values, ANDed across columns, as a replace's match) selects, by each file's statistics:
    the minimum and maximum of each matched column. Only the columns of `strings` (the
    table's string columns) are compared (a timestamp's statistics are strings too, in
    another form than a match's value); a file without statistics of a matched string column
    may hold anything; a file of no rows holds nothing.

    Conservative where Delta truncates a string's statistics (its first STRING_PREFIX
    characters or more, by its `stringPrefixLength`; a maximum truncated gains a last
    character of Delta's choosing): a value is outside a file's range only when it sorts
    below the minimum, or its first characters sort above those of the maximum without its
    possible mark."""
    matches, strings = list(matches), set(strings)
    for add in files:
        try:
            stats = json.loads(add.get("stats") or "null")
        except (TypeError, ValueError):
            return True
        if not isinstance(stats, dict):
            return True
        rows = stats.get("numRecords")
        if not isinstance(rows, int):
            return True
        if rows == 0:
            continue
        for match in matches:  # a column not compared may hold its values
            held = (
                c not in strings or _column_may_hold(stats, rows, c, vs) for c, vs in match.items()
            )
            if all(held):
                return True
    return False


# Delta's default `spark.databricks.io.skipping.stringPrefixLength` (ours is longer): a
# string statistic no longer than this was not truncated
STRING_PREFIX = 32


def _column_may_hold(stats: dict, rows: int, column: str, values: list[str]) -> bool:
    low = (stats.get("minValues") or {}).get(column)
    high = (stats.get("maxValues") or {}).get(column)
    if not (isinstance(low, str) and isinstance(high, str)):
        # no statistics of the column: only a column all null is ruled out
        return (stats.get("nullCount") or {}).get(column) != rows
    if any(not isinstance(v, str) for v in values):
        return True
    if len(high) <= STRING_PREFIX:  # not truncated: the maximum itself
        return any(low <= v <= high for v in values)
    shown = len(high) - 1
    return any(v >= low and v[:shown] <= high[:shown] for v in values)
