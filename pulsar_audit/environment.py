"""Failures of the place a job runs in, told as what is wrong and what to do (exit 2).

A lakehouse on a read-only or full file system, or a table whose Delta log is damaged,
surfaces as a Java exception deep in Spark or Delta, or as an OSError; `describe` turns such an
error into one sentence naming the thing (the lakehouse, the table) and the fix. Delta's
commits are atomic, so the write that failed left nothing half-written; what committed before
it is completed by a rerun (inputs are skipped only once their manifest row is written).
"""

from __future__ import annotations

import errno
import re

_DELTA_LOG = re.compile(r"((?:file:)?/[^\s'\",]*?)/_delta_log")
_RERUN = "nothing of the failed write was committed; run the command again once fixed"


def _texts(exc: BaseException) -> str:
    """The error's message with its causes (a Java error's text holds the Java causes)."""
    parts, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        # a Spark error's text is its description; the Java causes are in its stack trace
        parts.append(str(getattr(current, "_stackTrace", None) or ""))
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _errno(exc: BaseException) -> int | None:
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, OSError) and current.errno:
            return current.errno
        current = current.__cause__ or current.__context__
    return None


def describe(exc: BaseException, lakehouse: str | None) -> str | None:
    """What is wrong with the environment and what to do, or None if `exc` is not that."""
    text = _texts(exc)
    code = _errno(exc)
    where = f"the lakehouse {lakehouse}" if lakehouse else "the lakehouse"
    if code == errno.ENOSPC or "No space left on device" in text:
        return (
            f"{where}: the file system is full (No space left on device). Free space there "
            f"or point --lakehouse at a larger disk; {_RERUN}"
        )
    if code == errno.EROFS or "Read-only file system" in text:
        return (
            f"{where}: the file system is read-only. Mount it read-write or point --lakehouse "
            f"at a writable folder; {_RERUN}"
        )
    if code == errno.EACCES or "Permission denied" in text or "AccessDeniedException" in text:
        return (
            f"{where}: permission denied. Give this user write access to it or point "
            f"--lakehouse at a folder it may write; {_RERUN}"
        )
    if "schema mismatch detected when writing to the Delta table" in text:
        return (
            f"{where}: a table there is not the one pulsar-audit writes (its schema differs: "
            f"{_first_cause(text)}). Point --lakehouse (or the env's config) at a pulsar-audit "
            "lakehouse, or move that table away; nothing was written"
        )
    damaged = _DELTA_LOG.search(text)
    if damaged and _looks_damaged(text):
        table = damaged.group(1).removeprefix("file:")
        return (
            f"the Delta table {table}: its log (_delta_log) is damaged and cannot be read "
            f"({_first_cause(text)}). Restore the damaged file from a backup, or move the "
            "table away and ingest its inputs again (the table is created anew); nothing "
            "was written"
        )
    return None


def _looks_damaged(text: str) -> bool:
    markers = (
        "JsonParseException",
        "JsonMappingException",
        "Unrecognized token",
        "Unexpected character",
        "Unexpected end-of-input",
        "MALFORMED",
        "Malformed",
        "DELTA_LOG_FILE_NOT_FOUND",
        "DELTA_VERSIONS_NOT_CONTIGUOUS",
        "DELTA_STATE_RECOVER_ERROR",
        "DELTA_CHECKPOINT",
        "FileNotFoundException",
        "DELTA_INVALID",
        "corrupt",
    )
    return any(m in text for m in markers)


def _first_cause(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if any(k in line for k in ("Exception", "Error", "MALFORMED", "DELTA_")):
            return line[:300]
    return text.splitlines()[0][:300]
