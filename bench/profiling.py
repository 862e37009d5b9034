"""`bench/run.py --profile`: a copy of the conf folder whose Spark writes its event log, in the
form bench/stage_profile.py reads (one uncompressed file of JSON lines)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml


def event_log_settings(events_dir: Path) -> dict[str, str]:
    """The Spark settings that write one uncompressed event log file into `events_dir`."""
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events_dir.resolve().as_uri(),
        "spark.eventLog.compress": "false",  # Spark 4 compresses with zstd by default
        "spark.eventLog.rolling.enabled": "false",
    }


def profiling_conf_dir(conf_dir: Path, target: Path, env: str, events_dir: Path) -> Path:
    """A copy of `conf_dir` at `target` whose `<env>.yaml` also writes Spark's event log into
    `events_dir` (made empty); the file's other settings are kept. Returns `target`."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(conf_dir, target)
    path = target / f"{env}.yaml"
    raw = yaml.safe_load(path.read_text()) or {}
    spark = raw.setdefault("spark", {})
    spark["conf"] = {**(spark.get("conf") or {}), **event_log_settings(events_dir)}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    shutil.rmtree(events_dir, ignore_errors=True)
    events_dir.mkdir(parents=True)  # Spark refuses to start when the folder is missing
    return target
