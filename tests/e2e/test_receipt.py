"""A rerun with nothing new answers from the receipt, without Spark, exactly as Spark would.

One Spark `analyze` of the folder is shared by the module (each run costs tens of seconds);
every test starts from a copy of the lakehouse it left, with the folder exactly as analyzed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import jobs.ingest
from ingest.inputs import list_inputs
from jobs.analyze import _seen_before, analyze
from jobs.receipt import RECEIPT, JobStart, job_start, recorded_result, settled
from pipelines import runs_job
from pulsar_audit.config import Config, load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.output import print_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]


def _as_json(result: dict) -> str:
    out = []
    print_json(result, out=type("W", (), {"write": lambda self, s: out.append(s)})())
    return "".join(out)


def _write_folder(root: Path) -> Path:
    (root / "logs" / "client").mkdir(parents=True)
    shutil.copy(FIXTURES / "traces" / "run-a.jsonl", root)
    shutil.copy(FIXTURES / "logs" / "client-unload.log", root / "logs" / "client")
    return root


@dataclass(frozen=True)
class FirstRun:
    """The module's one Spark analyze: its folder, lakehouse, result, and a pristine copy of
    the folder (a test may change the folder; the next one starts from the original)."""

    folder: Path
    pristine: Path
    lakehouse_dir: Path
    result: dict[str, Any]


@dataclass(frozen=True)
class Analyzed:
    """A test's starting point: the folder as first analyzed, a lakehouse of its own."""

    folder: Path
    config: Config
    lakehouse: Lakehouse
    first: dict[str, Any]


@pytest.fixture(scope="module")
def first_run(spark, tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    root = tmp_path_factory.mktemp("receipt")
    folder = _write_folder(root / "in")
    shutil.copytree(folder, root / "pristine")
    config = load_config("local", lakehouse=str(root / "lakehouse"))
    result = analyze(Lakehouse(spark, config), config, folder)
    return FirstRun(folder, root / "pristine", config.lakehouse_path, result)


@pytest.fixture
def analyzed(spark, first_run: FirstRun, tmp_path: Path) -> Analyzed:
    # the receipt names the input files by path: the folder stays where it was analyzed
    shutil.rmtree(first_run.folder)
    shutil.copytree(first_run.pristine, first_run.folder)
    config = load_config("local", lakehouse=str(tmp_path / "lakehouse"))
    shutil.copytree(first_run.lakehouse_dir, config.lakehouse_path)
    return Analyzed(first_run.folder, config, Lakehouse(spark, config), first_run.result)


def test_a_rerun_with_nothing_new_is_the_spark_rerun(analyzed: Analyzed):
    lakehouse, config, folder = analyzed.lakehouse, analyzed.config, analyzed.folder
    first = analyzed.first
    assert first["ingest"]["files"] == 1 and first["infra"]["log_files"] == 1
    assert (config.lakehouse_path / RECEIPT).is_file()

    recorded = recorded_result(config, folder)
    spark_rerun = analyze(lakehouse, config, folder)  # the Spark path, nothing new to ingest
    assert spark_rerun["ingest"] == {"files": 0, "records": 0, "accepted": 0, "quarantined": 0}
    assert recorded == spark_rerun  # same values and types (datetimes stay datetimes)
    assert _as_json(recorded) == _as_json(spark_rerun)
    assert recorded["runs"] == first["runs"] and recorded["outages"] == first["outages"]


def test_anything_new_or_changed_takes_the_spark_path(analyzed: Analyzed):
    lakehouse, config, folder = analyzed.lakehouse, analyzed.config, analyzed.folder
    assert recorded_result(config, folder) is not None

    # a file it has not seen
    extra = folder / "run-b.jsonl"
    extra.write_text((FIXTURES / "traces" / "run-a.jsonl").read_text().replace("run-a", "run-b"))
    assert recorded_result(config, folder) is None
    extra.unlink()
    assert recorded_result(config, folder) is not None

    # a part of the folder: its result would name fewer runs
    assert recorded_result(config, folder / "logs") is None

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


def test_a_torn_receipt_is_ignored(analyzed: Analyzed):
    config = analyzed.config
    assert recorded_result(config, analyzed.folder) is not None
    receipt = config.lakehouse_path / RECEIPT
    receipt.write_text(receipt.read_text()[:100])
    assert recorded_result(config, analyzed.folder) is None


def test_the_cli_rerun_needs_no_jvm(analyzed: Analyzed):
    """With Java made unreachable, only an answer that never starts Spark can succeed; it
    prints what the Spark run printed (`--json` is print_json of the result)."""
    first = json.loads(_as_json(analyzed.first))
    argv = ["analyze", str(analyzed.folder), "--json"]
    argv += ["--lakehouse", str(analyzed.config.lakehouse_path)]
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "PATH": str(Path(sys.executable).parent)}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", *argv], cwd=REPO, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    again = json.loads(done.stdout)
    assert again["runs"] == first["runs"] and again["anomalies"] == first["anomalies"]
    assert again["ingest"]["files"] == 0


def _new_runs(root: Path, *runs: str) -> Path:
    """A new folder with one trace file per run of `runs` (run-a's events under that run id;
    for run-a itself, a second file of the run analyzed first)."""
    folder = root / f"new-{'-'.join(runs)}"
    folder.mkdir()
    text = (FIXTURES / "traces" / "run-a.jsonl").read_text()
    for run in runs:
        (folder / f"{run}-new.jsonl").write_text(text.replace("run-a", run))
    return folder


def _fingerprints(lakehouse: Lakehouse) -> list[tuple[str, str]]:
    rows = lakehouse.read("run_state").select("run_id", "input_fingerprint").collect()
    return sorted((r.run_id, r.input_fingerprint) for r in rows)


class Looks:
    """Which runs a job looked at: the check for runs left unchecked (every run's bookkeeping
    read) and the pipeline's fingerprints (None: every run's)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.stale: list[str] = []
        self.fingerprinted: list[list[str] | None] = []
        stale, fingerprints = jobs.ingest.runs_with_stale_checks, runs_job.input_fingerprints

        def stale_spy(lakehouse: Lakehouse) -> list[str]:
            self.stale.append(lakehouse.config.lakehouse_path.name)
            return stale(lakehouse)

        def fingerprints_spy(lakehouse, pipeline, runs=None):
            self.fingerprinted.append(runs)
            return fingerprints(lakehouse, pipeline, runs)

        monkeypatch.setattr(jobs.ingest, "runs_with_stale_checks", stale_spy)
        monkeypatch.setattr(runs_job, "input_fingerprints", fingerprints_spy)


def test_new_files_into_a_settled_lakehouse_are_looked_at_alone(
    spark, analyzed: Analyzed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The last analyze left every run checked and computed: a new folder's job checks and
    computes its own runs (a new one, and one it adds a file to) without reading every run's
    bookkeeping, and gives what the job that reads it all gives."""
    config = analyzed.config
    start = job_start(config)
    assert start is not None and settled(config, start)
    new = _new_runs(tmp_path, "run-a", "run-b")  # paths the manifest's statistics rule out
    full_config = load_config("local", lakehouse=str(tmp_path / "full"))
    shutil.copytree(config.lakehouse_path, full_config.lakehouse_path)
    (full_config.lakehouse_path / RECEIPT).unlink()  # nothing vouches for its runs
    looks = Looks(monkeypatch)
    full = analyze(Lakehouse(spark, full_config), full_config, new)
    assert looks.stale == ["full"] and looks.fingerprinted == [None]
    quick = analyze(analyzed.lakehouse, config, new)
    assert looks.stale == ["full"] and looks.fingerprinted == [None, ["run-a", "run-b"]]
    assert quick == full
    assert [r["run_id"] for r in quick["runs"]] == ["run-a", "run-b"]
    # what it recorded of each run is what a job reading every run's bookkeeping computes: a
    # later job that cannot take the short way finds nothing changed
    recorded = dict(_fingerprints(analyzed.lakehouse))
    assert sorted(recorded) == ["run-a", "run-b"]
    assert runs_job.input_fingerprints(analyzed.lakehouse, config.pipeline) == recorded
    assert settled(config, job_start(config))  # and its own receipt vouches for the next job


def test_a_folder_analyzed_before_is_not_looked_at_alone(analyzed: Analyzed, tmp_path: Path):
    """A file ingested again (new content, same path) replaces rows of runs it may no longer
    hold: only folders none of whose trace files the manifest may hold take the short way."""
    lakehouse = analyzed.lakehouse
    _, inputs = list_inputs(lakehouse, analyzed.folder)
    assert _seen_before(lakehouse, inputs)
    _, new = list_inputs(lakehouse, _new_runs(tmp_path, "run-b"))
    assert not _seen_before(lakehouse, new)


def test_only_a_receipt_that_settles_vouches_for_the_runs(analyzed: Analyzed):
    config = analyzed.config
    start = job_start(config)
    assert start is not None and settled(config, start)
    path = config.lakehouse_path / RECEIPT
    written = json.loads(path.read_text())
    for settles in ({"settles": False}, {}):  # the job was not deferred; an older receipt
        path.write_text(
            json.dumps({**{k: v for k, v in written.items() if k != "settles"}, **settles})
        )
        assert not settled(config, start)
    path.write_text(json.dumps(written))
    assert not settled(config, replace(start, code="other code"))
    moved = {**start.bookkeeping, "run_state": start.bookkeeping["run_state"] + 1}
    assert not settled(config, replace(start, bookkeeping=moved))


def test_a_job_is_alone_on_the_bookkeeping_when_its_commits_explain_every_version():
    start = JobStart("code", {"run_files": 3, "check_results": 5, "run_state": 2})
    own = {"run_files": 1, "check_results": 2, "run_state": 1}
    assert start.alone_on_bookkeeping({"run_files": 4, "check_results": 7, "run_state": 3}, own)
    # a check another job committed meanwhile (the `ingest` command's, a watch's)
    assert not start.alone_on_bookkeeping({"run_files": 4, "check_results": 8, "run_state": 3}, own)


def test_a_run_another_job_left_unchecked_is_found_by_the_next_analyze(
    spark, analyzed: Analyzed, tmp_path: Path
):
    lakehouse, config = analyzed.lakehouse, analyzed.config
    assert settled(config, job_start(config))
    # taken in with its checks left for later (as a watch's micro-batch does)
    report = jobs.ingest.ingest_traces(lakehouse, _new_runs(tmp_path, "run-c"), table_checks=False)
    assert report.runs == ["run-c"]
    assert not settled(config, job_start(config))  # the bookkeeping moved since the receipt
    result = analyze(lakehouse, config, _new_runs(tmp_path, "run-d"))
    assert [r["run_id"] for r in result["runs"]] == ["run-d"]
    checks = lakehouse.read("check_results").filter(F.col("level") == "table")
    assert checks.filter(F.col("run_id") == "run-c").count() > 0
    computed = {r.run_id for r in lakehouse.read("run_summary").select("run_id").collect()}
    assert computed == {"run-a", "run-c", "run-d"}
    assert settled(config, job_start(config))
