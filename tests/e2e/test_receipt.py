"""A rerun with nothing new answers from the receipt, without Spark, exactly as Spark would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from jobs.analyze import analyze
from jobs.receipt import RECEIPT, recorded_result
from pulsar_audit.output import print_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def _as_json(result: dict) -> str:
    out = []
    print_json(result, out=type("W", (), {"write": lambda self, s: out.append(s)})())
    return "".join(out)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    (root / "logs" / "client").mkdir(parents=True)
    shutil.copy(FIXTURES / "traces" / "run-a.jsonl", root)
    shutil.copy(FIXTURES / "logs" / "client-unload.log", root / "logs" / "client")
    return root


def test_a_rerun_with_nothing_new_is_the_spark_rerun(lakehouse, config, folder: Path):
    first = analyze(lakehouse, config, folder)
    assert first["ingest"]["files"] == 1 and first["infra"]["log_files"] == 1
    assert (config.lakehouse_path / RECEIPT).is_file()

    recorded = recorded_result(config, folder)
    spark_rerun = analyze(lakehouse, config, folder)  # the Spark path, nothing new to ingest
    assert spark_rerun["ingest"] == {"files": 0, "records": 0, "accepted": 0, "quarantined": 0}
    assert recorded == spark_rerun  # same values and types (datetimes stay datetimes)
    assert _as_json(recorded) == _as_json(spark_rerun)
    assert recorded["runs"] == first["runs"] and recorded["outages"] == first["outages"]


def test_anything_new_or_changed_takes_the_spark_path(lakehouse, config, folder: Path):
    analyze(lakehouse, config, folder)
    assert recorded_result(config, folder) is not None

    # a file it has not seen
    extra = folder / "run-b.jsonl"
    extra.write_text((FIXTURES / "traces" / "run-a.jsonl").read_text().replace("run-a", "run-b"))
    assert recorded_result(config, folder) is None
    extra.unlink()
    assert recorded_result(config, folder) is not None

    # a file it has seen, with other content
    log = folder / "logs" / "client" / "client-unload.log"
    original = log.read_bytes()
    log.write_bytes(original + b"\n")
    assert recorded_result(config, folder) is None
    log.write_bytes(original)
    assert recorded_result(config, folder) is not None

    # another job wrote to the lakehouse since
    lakehouse.record_stage("someone-else", "x")
    assert recorded_result(config, folder) is None

    # other pipeline settings
    analyze(lakehouse, config, folder)
    assert recorded_result(config, folder) is not None
    pipeline = replace(config.pipeline, outage_threshold_ms=config.pipeline.outage_threshold_ms + 1)
    assert recorded_result(replace(config, pipeline=pipeline), folder) is None


def test_a_torn_receipt_is_ignored(lakehouse, config, folder: Path):
    analyze(lakehouse, config, folder)
    receipt = config.lakehouse_path / RECEIPT
    receipt.write_text(receipt.read_text()[:100])
    assert recorded_result(config, folder) is None


def test_the_cli_rerun_needs_no_jvm(lakehouse, config, folder: Path, capsys):
    """With Java made unreachable, only an answer that never starts Spark can succeed."""
    from jobs.cli import main

    argv = ["analyze", str(folder), "--json", "--lakehouse", str(config.lakehouse_path)]
    capsys.readouterr()
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "PATH": str(Path(sys.executable).parent)}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", *argv], cwd=REPO, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    again = json.loads(done.stdout)
    assert again["runs"] == first["runs"] and again["anomalies"] == first["anomalies"]
    assert again["ingest"]["files"] == 0
