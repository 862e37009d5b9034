"""The input files under one folder, listed once and classified by kind: traces, the logs of
each source, ZooKeeper captures."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ingest.logs import LOG_SUFFIXES
from ingest.skeleton import refuse_unread, wanted_by
from ingest.traces import TRACE_SUFFIXES
from ingest.zk_ingest import ZK_SUFFIXES
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import NoInputError
from pulsar_audit.storage import FileStat, FileStore, local_form, precheck_local, segments

LOG_SOURCES = ("broker", "bookie", "client")
T = TypeVar("T")


@dataclass
class Inputs:
    """The input files under one root, by kind (identity paths, or listed files)."""

    traces: list = field(default_factory=list)
    logs: dict[str, list] = field(default_factory=dict)
    zk: list = field(default_factory=list)

    def empty(self) -> bool:
        return not self.traces and not self.logs and not self.zk

    def every(self) -> list:
        return [*self.traces, *self.zk, *(f for files in self.logs.values() for f in files)]

    def local_paths(self) -> list[Path] | None:
        """Every listed file's local path (listed as FileStats), None if one is not local."""
        every = self.every()
        if not all(isinstance(f, FileStat) and f.uri.startswith("file:") for f in every):
            return None
        return sorted({Path(f.path) for f in every})


def classify(root: str, files: list[T], path_of: Callable[[T], str]) -> Inputs:
    """Which files under the folder `root` are traces, logs of a source, ZooKeeper captures.

    Logs are the files under a `logs/<source>/` folder inside `root` (the capture harness's
    layout). Works on path strings only, so a listing from any file system can be classified.
    """
    is_trace, is_zk = wanted_by(TRACE_SUFFIXES, ZK_SUFFIXES), wanted_by(ZK_SUFFIXES)
    is_log = wanted_by(LOG_SUFFIXES)
    root_parts = segments(root)
    found = Inputs()
    for file in files:
        path = path_of(file)
        parts = segments(path)
        name = parts[-1]
        below = len(root_parts) if parts[: len(root_parts)] == root_parts else 1
        if is_trace(name):
            found.traces.append(file)
        if is_zk(name):
            found.zk.append(file)
        source = _log_source(parts[:-1], below)
        if source and is_log(name):
            found.logs.setdefault(source, []).append(file)
    return found


def _log_source(folders: list[str], below: int) -> str | None:
    """The source of the innermost `logs/<source>` pair of `folders` whose <source> is at
    index `below` or deeper (strictly inside the root)."""
    for i in range(len(folders) - 1, max(below, 1) - 1, -1):
        if folders[i] in LOG_SOURCES and folders[i - 1] == "logs":
            return folders[i]
    return None


def check_inputs(path: str | Path) -> list[Path] | None:
    """Pre-flight before Spark starts: fail when a local `path` holds no input at all; else
    its input files (`local_input_files`), for the rerun receipt to compare.

    Paths on other file systems (dbfs:, s3a:, abfss: …) are checked once Spark lists them.
    """
    precheck_local(str(path))
    local = local_form(str(path))
    if local is None:
        return None
    if not os.path.isdir(local):
        return [Path(local).resolve()]
    names = [os.path.join(d, f) for d, _, files in os.walk(local) for f in files]
    found = classify(local, names, str)
    require_inputs(str(path), found, local)
    return sorted({Path(f).resolve() for f in found.every()})


def local_input_files(path: str | Path) -> list[Path] | None:
    """Every file `analyze PATH` would consider (traces, logs, ZooKeeper captures), resolved,
    when PATH is on the local file system (a plain path or a `file:` URI); None otherwise."""
    local = local_form(str(path))
    if local is None or not os.path.exists(local):
        return None
    return check_inputs(path)


def require_inputs(path: str, inputs: Inputs, root: str) -> None:
    """Fail when `path` holds no input file, or one Spark would never read (its name) or
    `watch` would not (in a hidden folder below `root`: `path` in the form of the files'
    paths)."""
    if inputs.empty():
        raise NoInputError(
            f"{path}: no trace files (*.jsonl, *.jsonl.gz, *.parquet), no logs "
            "(logs/broker|bookie|client/*.log) and no ZooKeeper captures (*.zk.jsonl) found there"
        )
    paths = [f.path if isinstance(f, FileStat) else str(f) for f in inputs.every()]
    refuse_unread(paths, root)


def list_inputs(lakehouse: Lakehouse, path: str | Path) -> tuple[bool, Inputs]:
    """(whether `path` is a folder, its input files), listed once through Hadoop's FileSystem."""
    store = FileStore(lakehouse.spark)
    if store.is_file(str(path)):
        return False, Inputs()  # a single file is a trace: ingest_traces checks its name
    listed = store.list_files(str(path))
    root = store.normalize(str(path))
    inputs = classify(root, listed, lambda f: f.path)
    require_inputs(str(path), inputs, root)
    return True, inputs
