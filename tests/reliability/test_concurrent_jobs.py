"""Two jobs at once: two `analyze` processes on one lakehouse, started together, over inputs
that overlap (the same files) and inputs that do not. Each finishes, or fails with a clear
message (exit 2) and succeeds when run again; the tables then equal one clean run over all
the inputs: no row doubled, none half-applied.

Default: one pair. Long (PULSAR_AUDIT_RELIABILITY=long): PULSAR_AUDIT_CONCURRENT_PAIRS (5).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_lakehouse import (
    ROOT,
    differing_tables,
    digest,
    is_long,
    key_duplicates,
    orphans,
    record_figure,
    suite_config,
    unreconciled_files,
    write_conf_dir,
)

from ingest.synthetic import RunSpec, write_run
from jobs.analyze import analyze
from pulsar_audit.delta_io import Lakehouse

CONFLICT_MESSAGE = "Another pulsar-audit job is writing the same lakehouse"
BROKER_LOG = ROOT / "tests" / "fixtures" / "logs" / "broker-standalone.log"


def build_parts(folder: Path) -> Path:
    """inputs/{part-a, part-b, shared}: three runs; shared also holds a broker log."""
    write_run(folder / "part-a", RunSpec("run-a", messages=40, lost={5}))
    write_run(folder / "part-b", RunSpec("run-b", messages=40, duplicated={7}))
    write_run(folder / "shared", RunSpec("run-s", messages=40, outages={10: 300}))
    (folder / "shared" / "logs" / "broker").mkdir(parents=True)
    shutil.copy(BROKER_LOG, folder / "shared" / "logs" / "broker" / "standalone.log")
    return folder


# Which folders the two jobs analyze, pair by pair: overlapping (one holds the other's files)
# and disjoint, in turn.
PAIRS = (
    (".", "part-b"),
    ("part-a", "part-b"),
    ("part-b", "."),
    ("shared", "."),
    ("part-a", "shared"),
)


def _start(inputs: Path, lakehouse: Path, conf_dir: Path) -> subprocess.Popen:
    exe = Path(sys.executable).parent / "pulsar-audit"
    return subprocess.Popen(
        [str(exe), "analyze", str(inputs), "--lakehouse", str(lakehouse), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PULSAR_AUDIT_CONF_DIR": str(conf_dir)},
    )


def run_pair(
    spark, inputs: Path, conf_dir: Path, lakehouse_dir: Path, pair: tuple[str, str]
) -> dict[str, object]:
    """Start both jobs together; retry (in this process) a job that gave up on a conflict."""
    jobs = [_start((inputs / part).resolve(), lakehouse_dir, conf_dir) for part in pair]
    outcome: dict[str, object] = {"pair": list(pair), "retried": 0}
    lakehouse = Lakehouse(spark, suite_config(conf_dir, lakehouse_dir))
    for part, job in zip(pair, jobs, strict=True):
        _, stderr = job.communicate(timeout=1200)
        if job.returncode == 0:
            continue
        if job.returncode == 2 and CONFLICT_MESSAGE in stderr:
            outcome["retried"] += 1
            analyze(lakehouse, lakehouse.config, (inputs / part).resolve())
            continue
        outcome["error"] = f"job on {part} exited {job.returncode}: {stderr[-2000:]}"
        return outcome
    # both jobs ran to the end, so a last analyze of everything finds nothing new to do, and
    # whatever a job recomputed must equal one clean run over all the inputs
    analyze(lakehouse, lakehouse.config, inputs)
    return outcome


@pytest.fixture(scope="module")
def parts(spark, tmp_path_factory: pytest.TempPathFactory) -> dict:
    from spark_test_conf import TEST_SPARK_CONF

    root = tmp_path_factory.mktemp("concurrent")
    inputs = build_parts(root / "inputs")
    conf_dir = write_conf_dir(root / "conf", TEST_SPARK_CONF, alerts_file=False)
    reference = Lakehouse(spark, suite_config(conf_dir, root / "reference"))
    analyze(reference, reference.config, inputs)
    return {"root": root, "inputs": inputs, "conf_dir": conf_dir, "digest": digest(reference)}


def check_pair(spark, parts: dict, pair: tuple[str, str], name: str) -> dict[str, object]:
    lakehouse_dir = parts["root"] / name
    outcome = run_pair(spark, parts["inputs"], parts["conf_dir"], lakehouse_dir, pair)
    if "error" in outcome:
        return outcome
    lakehouse = Lakehouse(spark, suite_config(parts["conf_dir"], lakehouse_dir))
    problems = {
        "differing": differing_tables(parts["digest"], digest(lakehouse)),
        "duplicates": key_duplicates(lakehouse),
        "orphans": orphans(lakehouse),
        "unreconciled": unreconciled_files(lakehouse),
    }
    problems = {k: v for k, v in problems.items() if v}
    if problems:
        outcome["error"] = problems
    outcome["duplicates"] = sum(key_duplicates(lakehouse).values())
    return outcome


def record_pairs(outcomes: list[dict[str, object]]) -> list[dict[str, object]]:
    """Record the pairs' figures (scripts/reliability.py); the failed outcomes."""
    failed = [o for o in outcomes if "error" in o]
    record_figure(
        "concurrency",
        {
            "pairs": len(outcomes),
            "both_finished": sum(1 for o in outcomes if not o.get("retried")),
            "retried_after_a_clear_conflict_error": sum(o.get("retried", 0) for o in outcomes),
            "duplicate_rows": sum(o.get("duplicates", 0) for o in outcomes),
            "identical_to_a_clean_run": len(outcomes) - len(failed),
            "failures": failed,
        },
    )
    return failed


def test_two_analyze_jobs_at_once_leave_what_one_clean_run_leaves(spark, parts: dict):
    outcome = check_pair(spark, parts, PAIRS[0], "pair-0")
    if not is_long():  # the long suite records its own pairs
        record_pairs([outcome])
    assert "error" not in outcome, outcome["error"]


@pytest.mark.reliability_long
@pytest.mark.skipif(not is_long(), reason="long concurrency suite: PULSAR_AUDIT_RELIABILITY=long")
def test_long_concurrent_pairs(spark, parts: dict):
    wanted = max(int(os.environ.get("PULSAR_AUDIT_CONCURRENT_PAIRS", "5")), 5)
    chosen = [PAIRS[i % len(PAIRS)] for i in range(wanted)]
    outcomes = [check_pair(spark, parts, pair, f"long-{i}") for i, pair in enumerate(chosen)]
    failed = record_pairs(outcomes)
    assert not failed, failed
