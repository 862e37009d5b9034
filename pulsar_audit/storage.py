"""Input files as URIs, through Hadoop's FileSystem: local, `file:`, Volumes, object stores alike.

Every data path the jobs read is listed, stat'ed and hashed through the FileSystem of the
Spark session's JVM (`org.apache.hadoop.fs`), so `/data/x`, `file:///data/x`,
`dbfs:/Volumes/cat/schema/landing/x`, `s3a://bucket/x` and `abfss://…` behave the same.

A file has two forms:
- `path`, its identity, recorded in `bronze.ingested_files` and every row's `source_file`:
  for the local file system the absolute path with symlinks resolved (what pulsar-audit has
  always recorded, so reruns on an existing lakehouse do not re-ingest); elsewhere the
  qualified URI as Hadoop prints it (`s3a://bucket/a b.jsonl`, unescaped).
- `uri`, what Spark is told to read (`file:/abs/a b.jsonl`, or the qualified URI): always
  with its scheme, so a cluster whose default file system is not `file:` reads the same file.

The only local-only helpers are `local_form` and `precheck_local`: a pre-flight before
Spark starts, so that a mistyped local path costs nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pulsar_audit.errors import InputError, SetupError

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileStat:
    """One input file: identity `path`, the `uri` Spark reads, size and modification time."""

    path: str
    uri: str
    size_bytes: int
    modified_ms: int

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


_HASHED: dict[tuple[str, int, int, int, int], str] = {}  # file identity and times → SHA-256
# A file's times are kept by a coarse clock: a hash is kept only for a file untouched for this
# long before it was read, so that a later rewrite of the same size cannot keep its old times.
_SETTLED_NS = 2_000_000_000


def local_sha256(path: str) -> str:
    """SHA-256 of a local file's bytes, streamed; once per process for a settled file whose
    inode, size and times did not change since (ingest and the rerun receipt both need it)."""
    stat = os.stat(path)
    key = (path, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    found = _HASHED.get(key)
    if found is None:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
        found = digest.hexdigest()
        if time.time_ns() - stat.st_mtime_ns > _SETTLED_NS:
            _HASHED[key] = found
    return found


def local_form(path: str) -> str | None:
    """The local file-system path `path` names (a plain path or a `file:` URI), else None."""
    match = _SCHEME.match(path)
    if match is None:
        return path
    if match["scheme"].lower() != "file":
        return None
    rest = path[match.end() :]
    if rest.startswith("//"):  # file://host/path: only an empty or local host is local
        host, _, tail = rest[2:].partition("/")
        if host not in ("", "localhost"):
            return None
        rest = "/" + tail
    return rest


def precheck_local(path: str) -> None:
    """Fail before Spark starts when a local `path` does not exist (other schemes: later)."""
    local = local_form(str(path))
    if local is not None and not os.path.exists(local):
        raise InputError(f"{path}: no such file or directory")


class FileStore:
    """Listing, status and content hash of input files through the session's Hadoop FileSystem."""

    def __init__(self, spark: Any):
        jvm = getattr(spark, "_jvm", None)
        if jvm is None:
            raise SetupError(
                "listing input files needs the Spark JVM (a classic Spark session); on "
                "Databricks run the jobs on a cluster in dedicated (single user) access mode"
            )
        self._jvm = jvm
        self._conf = spark._jsc.hadoopConfiguration()

    # ------------------------------------------------------------------ naming
    def _qualified(self, path: str) -> tuple[Any, Any]:
        """(FileSystem, qualified Path) of `path`; a relative local path is taken from cwd."""
        path = str(path)
        if _SCHEME.match(path) is None and not path.startswith("/"):
            path = os.path.abspath(path)  # the Python process's cwd, as a user expects
        hadoop_path = self._jvm.org.apache.hadoop.fs.Path(path)
        fs = hadoop_path.getFileSystem(self._conf)
        return fs, fs.makeQualified(hadoop_path)

    def _stat(self, status: Any) -> FileStat:
        qualified = status.getPath()
        uri = qualified.toUri()
        if (uri.getScheme() or "").lower() == "file":
            identity = os.path.realpath(uri.getPath())
            read_as = str(self._jvm.org.apache.hadoop.fs.Path("file", None, identity).toString())
        else:
            identity = read_as = str(qualified.toString())
        return FileStat(identity, read_as, int(status.getLen()), int(status.getModificationTime()))

    def normalize(self, path: str) -> str:
        """The identity under which `path` is recorded (see the module's docstring)."""
        _, qualified = self._qualified(path)
        uri = qualified.toUri()
        if (uri.getScheme() or "").lower() == "file":
            return os.path.realpath(uri.getPath())
        return str(qualified.toString())

    # ------------------------------------------------------------------ listing
    def exists(self, path: str) -> bool:
        fs, qualified = self._qualified(path)
        return bool(fs.exists(qualified))

    def is_file(self, path: str) -> bool:
        fs, qualified = self._qualified(path)
        return bool(fs.exists(qualified)) and bool(fs.getFileStatus(qualified).isFile())

    def status(self, path: str) -> FileStat:
        fs, qualified = self._qualified(path)
        if not fs.exists(qualified):
            raise InputError(f"{path}: no such file or directory")
        return self._stat(fs.getFileStatus(qualified))

    def list_files(self, root: str) -> list[FileStat]:
        """Every file under `root` (recursively), or `root` itself if it is a file; sorted."""
        fs, qualified = self._qualified(root)
        if not fs.exists(qualified):
            raise InputError(f"{root}: no such file or directory")
        status = fs.getFileStatus(qualified)
        if status.isFile():
            return [self._stat(status)]
        return sorted(
            (self._stat(s) for s in _iterate(fs.listFiles(qualified, True))), key=lambda f: f.path
        )

    # ------------------------------------------------------------------ content
    def sha256(self, file: FileStat) -> str:
        """SHA-256 of the file's bytes, streamed (never held in memory).

        Local files are read by Python directly (the same bytes, without crossing the JVM
        gateway); any other scheme is read through the FileSystem's input stream.
        """
        if file.uri.startswith("file:"):
            return local_sha256(file.path)
        digest = hashlib.sha256()
        fs, qualified = self._qualified(file.uri)
        stream = fs.open(qualified)
        try:
            while chunk := bytes(stream.readNBytes(_CHUNK)):
                digest.update(chunk)
        finally:
            stream.close()
        return digest.hexdigest()


def _iterate(remote_iterator: Any) -> Iterator[Any]:
    while remote_iterator.hasNext():
        yield remote_iterator.next()


def segments(path: str) -> list[str]:
    """The names along a path or URI, after its scheme and authority (for layout rules)."""
    local = local_form(path)
    if local is None:
        rest = path[_SCHEME.match(path).end() :]
        if rest.startswith("//"):
            rest = rest[2:].partition("/")[2]
        local = rest
    return [part for part in local.split("/") if part]
