"""Two jobs at once: two `analyze` processes on one lakehouse, started together, over inputs
that overlap (the same files) and inputs that do not. Each finishes, or fails with a clear
message (exit 2) and succeeds when run again; the tables then equal one clean run over all
the inputs: no row doubled, none half-applied.

The inputs and the clean run are the suites' shared reference (conftest.py): part-a,
part-b and shared are its three parts. Only in the long suites (PULSAR_AUDIT_RELIABILITY=long,
scripts/reliability.py): PULSAR_AUDIT_CONCURRENT_PAIRS pairs (at least 5, the first of them
the pair the default run held until session 25: two analyze JVMs and a clean comparison, 290 s
of a 50-minute default suite, docs/performance.md "Session 25").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_lakehouse import (
    Reference,
    differing_tables,
    digest,
    is_long,
    key_duplicates,
    orphans,
    record_figure,
    suite_config,
    unreconciled_files,
)

from jobs.analyze import analyze
from pulsar_audit.delta_io import Lakehouse

CONFLICT_MESSAGE = "Another pulsar-audit job is writing the same lakehouse"


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


def check_pair(spark, reference: Reference, pair: tuple[str, str], name: str) -> dict:
    lakehouse_dir = reference.root / name
    outcome = run_pair(spark, reference.inputs, reference.conf_dir, lakehouse_dir, pair)
    if "error" in outcome:
        return outcome
    lakehouse = Lakehouse(spark, reference.config(lakehouse_dir))
    duplicates = key_duplicates(lakehouse)
    problems = {
        "differing": differing_tables(reference.digest, digest(lakehouse)),
        "duplicates": duplicates,
        "orphans": orphans(lakehouse),
        "unreconciled": unreconciled_files(lakehouse),
    }
    problems = {k: v for k, v in problems.items() if v}
    if problems:
        outcome["error"] = problems
    outcome["duplicates"] = sum(duplicates.values())
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


@pytest.mark.reliability_long
@pytest.mark.skipif(not is_long(), reason="long concurrency suite: PULSAR_AUDIT_RELIABILITY=long")
def test_long_concurrent_pairs(spark, reference: Reference):
    wanted = max(int(os.environ.get("PULSAR_AUDIT_CONCURRENT_PAIRS", "5")), 5)
    chosen = [PAIRS[i % len(PAIRS)] for i in range(wanted)]
    outcomes = [check_pair(spark, reference, pair, f"long-{i}") for i, pair in enumerate(chosen)]
    failed = record_pairs(outcomes)
    assert not failed, failed
