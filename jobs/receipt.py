"""A rerun with nothing new answers without starting Spark.

After every complete `analyze` on a local (path) lakehouse, a receipt is written next to the
tables: the input files that analyze saw (path → SHA-256), the Delta version of every table,
a hash of the package's code and of the pipeline settings, and the result it printed.

A later `analyze` first checks the receipt, before any JVM starts: when the input files it
finds are exactly those the receipt lists, with the same content hashes (the result names the
runs of those files), every table is still at the version
the receipt recorded (so nothing — another analyze, `ingest`, `pipeline`, a crash half way —
wrote to the lakehouse since), and neither the code nor the settings changed, then the Spark
path would ingest nothing, skip every stage and read back exactly the gold tables that
produced the recorded result. The receipt's result is returned with the ingest counts at zero,
as the Spark path reports them. Anything else (a new or changed file, a moved table version, a
missing or unreadable receipt, alert sinks configured, a catalog lakehouse) takes the Spark path.

A receipt written by a job whose writes were deferred and committed alone also vouches for the
runs' bookkeeping (`settled`): at the versions it records, every run the lakehouse held had its
table-level checks and its silver and gold computed by this code with these settings. While
`bronze.run_files`, `bronze.check_results` and `silver.run_state` are still at those versions,
the next `analyze` of files never ingested before knows which runs can lack either without
reading those tables whole: the ones it takes in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ingest.inputs import local_input_files
from pulsar_audit.config import Config
from pulsar_audit.delta_log import local_versions
from pulsar_audit.schemas import TABLES
from pulsar_audit.storage import local_sha256

log = logging.getLogger(__name__)

RECEIPT = "_analyze_receipt.json"
FORMAT = 2
# The packages whose code decides what analyze computes and prints.
PACKAGES = ("pulsar_audit", "ingest", "checks", "pipelines", "models", "serve", "jobs")
NO_INGEST = {"files": 0, "records": 0, "accepted": 0, "quarantined": 0}
NO_INFRA = {"log_files": 0, "log_lines": 0, "zk_files": 0, "zk_records": 0}
# The tables that say which runs are checked and computed (see `settled`).
BOOKKEEPING = ("run_files", "check_results", "run_state")


def applies(config: Config) -> bool:
    """Receipts are kept for local lakehouses without alert sinks (sends are never skipped)."""
    return config.storage == "path" and not config.alerts.sinks


def code_fingerprint() -> str:
    """SHA-256 over the source of every module of the package (any code change ⇒ new hash)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in PACKAGES:
        for file in sorted((root / package).rglob("*.py")):
            digest.update(str(file.relative_to(root)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def settings(config: Config) -> str:
    """The settings analyze's result depends on."""
    return repr(config.pipeline)


def hashes(files: Iterable[Path]) -> dict[str, str]:
    """SHA-256 of each file's bytes (those the ingest of this process hashed are not read
    again)."""
    return {str(file): local_sha256(str(file)) for file in files}


def _file(config: Config) -> Path:
    return config.lakehouse_path / RECEIPT


def _encode(value: Any) -> Any:
    """Datetimes keep their type through the receipt, so both renderings stay identical."""
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _decode(obj: dict[str, Any]) -> Any:
    if obj.keys() == {"$datetime"}:
        return datetime.fromisoformat(obj["$datetime"])
    if obj.keys() == {"$date"}:
        return date.fromisoformat(obj["$date"])
    return obj


def _read(config: Config, code: str | None = None) -> dict[str, Any] | None:
    """The receipt, if this code (`code`, else the package's now) with these settings wrote
    it (else None)."""
    if not applies(config):
        return None
    try:
        receipt = json.loads(_file(config).read_text(), object_hook=_decode)
    except (OSError, ValueError):
        return None  # no receipt yet, or a torn/foreign file: the Spark path decides
    if receipt.get("format") != FORMAT:
        return None
    if receipt.get("code") != (code_fingerprint() if code is None else code):
        log.info("receipt: the code changed since it was written")
        return None
    if receipt.get("settings") != settings(config):
        log.info("receipt: the pipeline settings changed since it was written")
        return None
    return receipt


@dataclass(frozen=True)
class JobStart:
    """What an `analyze` saw as it began (a deferred one: under the ingest lock), for the
    receipts it reads and writes: the code it runs and the versions of the runs' bookkeeping.
    """

    code: str
    bookkeeping: dict[str, int]

    def alone_on_bookkeeping(self, now: dict[str, int], own: dict[str, int]) -> bool:
        """Whether the bookkeeping tables moved from the job's start to `now` by the job's
        own commits (`own`, per table) only: no other job wrote a check or a run's rows."""
        return all(now[t] - self.bookkeeping[t] == own[t] for t in BOOKKEEPING)


def job_start(config: Config) -> JobStart | None:
    """The start of a job on a lakehouse that keeps receipts (else None)."""
    if not applies(config):
        return None
    return JobStart(code_fingerprint(), local_versions(config, BOOKKEEPING))


def settled(config: Config, start: JobStart) -> bool:
    """Whether every run the lakehouse holds has its table-level checks and its silver and
    gold computed by this code with these settings: the last complete `analyze` (deferred,
    committed alone) left them so, and nothing has written the runs' bookkeeping since.

    Then a job that takes in only files never ingested before changes only the runs of those
    files. start: the job's, taken before it writes anything."""
    receipt = _read(config, start.code)
    if receipt is None or receipt.get("settles") is not True:
        return False
    return all(receipt.get("versions", {}).get(t) == start.bookkeeping[t] for t in BOOKKEEPING)


def recorded_result(
    config: Config, path: str | Path, files: list[Path] | None = None
) -> dict[str, Any] | None:
    """The result of the last analyze, if a rerun on `path` now would compute exactly it.

    files: `path`'s input files as the pre-flight found them (else listed here).
    """
    receipt = _read(config)
    if receipt is None:
        return None
    now = local_versions(config, TABLES)
    moved = sorted(t for t in now if receipt.get("versions", {}).get(t) != now[t])
    if moved:
        log.info("receipt: tables written since it was written: %s", ", ".join(moved))
        return None
    known = receipt.get("files", {})
    files = local_input_files(path) if files is None else files
    if files is None:
        return None
    unknown = [f for f in files if str(f) not in known]
    if unknown:
        log.info("receipt: %s is not among the files last analyzed", unknown[0])
        return None
    if len(files) != len(known):  # the result names the runs of the files analyzed
        log.info("receipt: written for other inputs than %s", path)
        return None
    changed = [f for f, digest in hashes(files).items() if known[f] != digest]
    if changed:
        log.info("receipt: %s changed since it was last analyzed", changed[0])
        return None
    return {"ingest": dict(NO_INGEST), "infra": dict(NO_INFRA), **receipt["result"]}


def write_receipt(
    config: Config,
    path: str | Path,
    versions: dict[str, int],
    result: dict[str, Any],
    files: list[Path] | None = None,
    start: JobStart | None = None,
    settles: bool = False,
) -> None:
    """Record `result`, computed with the lakehouse at `versions`, for `path`'s inputs.

    files: the input files under `path` as the job listed them (else listed here).
    start: the job's start (its code is the one recorded; else the package's now).
    settles: the job's writes were deferred and committed alone, and no other job wrote the
    bookkeeping meanwhile, so every run is checked and computed at `versions` (see
    `settled`).
    Written to a temporary file and renamed: a reader sees the old receipt or the new one.
    """
    files = local_input_files(path) if files is None else files
    if not applies(config) or files is None:
        return
    receipt = {
        "format": FORMAT,
        "code": start.code if start is not None else code_fingerprint(),
        "settings": settings(config),
        "versions": versions,
        "settles": settles,
        "files": hashes(files),
        "result": {k: v for k, v in result.items() if k not in ("ingest", "infra", "recognized")},
    }
    target = _file(config)
    temporary = target.with_name(f".{RECEIPT}.{os.getpid()}")
    temporary.write_text(json.dumps(receipt, default=_encode))
    os.replace(temporary, target)
