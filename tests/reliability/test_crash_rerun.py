"""Crash anywhere, rerun, same result: `analyze` is SIGKILLed at a kill point (after a Delta
commit, or as a stage starts), run again, and every table must equal the clean run's.

Equal means: the same multiset of rows per table (order-free hash, columns that record when or
by which attempt a row was written left out), no two rows with one natural key, no row of a
file missing from the manifest or of a run without files, and read = accepted + quarantined
for every file.

Default: one crash chain over three of the stage points, one per way a job recovers (see
CHAIN_POINTS): `analyze` is killed at the first point, the job that recovers from it is killed
at the second, and so on (each kill lands in a job that is itself recovering from the last
one); a last run then finishes, and its tables must equal the clean run's. The long run
(PULSAR_AUDIT_RELIABILITY=long, scripts/reliability.py) runs the chain over all five stage
points, kills a fresh job at each of them and then at every n-th point the clean run passed
(at least 20), each followed by a rerun and the comparison.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from reliability_lakehouse import (
    Reference,
    analyze_child,
    differing_tables,
    digest,
    is_long,
    key_duplicates,
    orphans,
    record_figure,
    unreconciled_files,
)

from jobs.analyze import analyze
from pulsar_audit import faults
from pulsar_audit.delta_io import Lakehouse

# One point per stage, in the order a run passes them: trace ingest between two tables of a
# batch, ZooKeeper ingest (after the logs), silver between two tables, the correlation stage,
# and alerts raised but not yet delivered. (The long run adds every n-th point, e.g. after a
# manifest, before the checks.)
STAGE_POINTS = (
    "commit:producer_events:1",
    "commit:zk_changes:1",
    "commit:message_history:1",
    "stage:causes:1",
    "commit:alerts:1",
)
# The default chain: one stage point per way a job recovers, each kill costing a child JVM and
# most of an analyze. Small inputs defer their writes (pulsar_audit/deferred.py), so a kill
# lands in one of three windows: (1) bronze being committed, the manifest not yet: the next
# job ingests the files again and replaces their rows; (2) bronze complete, silver and gold
# being committed behind the correlation, the manifest not yet: the next job ingests again and
# recomputes the runs over what is there; (3) everything committed, the alerts raised but not
# delivered: the next job ingests and recomputes nothing and delivers them. The long chain's
# other two points fall in windows already here: ZooKeeper's bronze table is committed in the
# same batch as the traces' (1), the correlation stage starts while silver is committed (2).
CHAIN_POINTS = (
    "commit:producer_events:1",
    "commit:message_history:1",
    "commit:alerts:1",
)
LONG_MIN_POINTS = 20


def test_the_clean_run_is_sound(spark, reference: Reference):
    """The reference itself: every kind of input landed, nothing doubled or orphaned."""
    lakehouse = Lakehouse(spark, reference.config(reference.root / "reference"))
    tables = reference.digest
    for table in ("producer_events", "broker_log", "client_log", "zk_changes", "quarantine"):
        assert tables[table][0] > 0, f"{table} is empty in the clean run"
    for table in ("message_history", "anomalies", "outages", "infra_events", "alerts"):
        assert tables[table][0] > 0, f"{table} is empty in the clean run"
    assert key_duplicates(lakehouse) == {}
    assert orphans(lakehouse) == {}
    assert unreconciled_files(lakehouse) == []
    assert reference.result["ingest"]["quarantined"] == 3  # the three bad trace lines
    assert {r["run_id"] for r in reference.result["runs"]} == {"run-faults", "run-b"}
    missing = [p for p in STAGE_POINTS if p not in reference.points]
    assert not missing, f"kill points the clean run never passed: {missing}"


def killed_at(reference: Reference, point: str, lakehouse_dir: Path) -> str | None:
    """Run `analyze` in a child process until it kills itself at `point`; why not, if not."""
    killed = analyze_child(
        reference.inputs, lakehouse_dir, reference.conf_dir, env={faults.KILL_AT_VAR: point}
    )
    if killed.returncode == -signal.SIGKILL:
        return None
    return f"not killed at {point} (exit {killed.returncode}): {killed.stderr[-1500:]}"


def rerun_and_compare(spark, reference: Reference, lakehouse_dir: Path) -> dict[str, object]:
    """Run `analyze` to the end in this process; what differs from the clean run."""
    lakehouse = Lakehouse(spark, reference.config(lakehouse_dir))
    rerun = analyze(lakehouse, lakehouse.config, reference.inputs)
    problems: dict[str, object] = {}
    differing = differing_tables(reference.digest, digest(lakehouse))
    if differing:
        problems["differing"] = differing
    for name, found in (
        ("duplicates", key_duplicates(lakehouse)),
        ("orphans", orphans(lakehouse)),
        ("unreconciled", unreconciled_files(lakehouse)),
    ):
        if found:
            problems[name] = found
    if rerun["runs"] != reference.result["runs"]:
        problems["runs"] = "the rerun's verdicts differ from the clean run's"
    return problems


def crash_and_rerun(spark, reference: Reference, points: list[str], name: str) -> dict:
    """Kill a job at each of `points` in turn on one lakehouse, then rerun and compare."""
    lakehouse_dir = reference.root / name
    for point in points:
        error = killed_at(reference, point, lakehouse_dir)
        if error:
            return {"points": points, "error": error}
    problems = rerun_and_compare(spark, reference, lakehouse_dir)
    return {"points": points, **({"error": json.dumps(problems, default=str)} if problems else {})}


def test_a_chain_of_crashes_then_a_rerun_equals_the_clean_run(spark, reference: Reference):
    chain = list(STAGE_POINTS if is_long() else CHAIN_POINTS)
    outcome = crash_and_rerun(spark, reference, chain, "chain")
    if not is_long():  # the long suite records its own points
        record_figure(
            "crash",
            {
                "mode": "chain",
                "points_passed_by_a_clean_run": len(reference.points),
                "kill_points_tried": len(chain),
                "identical": 0 if "error" in outcome else len(chain),
                "points": chain,
                "failures": [outcome] if "error" in outcome else [],
            },
        )
    assert "error" not in outcome, outcome["error"]


def spread(points: list[str], wanted: int) -> list[str]:
    """`wanted` points evenly spread over the run (first and last included)."""
    if len(points) <= wanted:
        return points
    step = (len(points) - 1) / (wanted - 1)
    return [points[round(i * step)] for i in range(wanted)]


@pytest.mark.reliability_long
@pytest.mark.skipif(not is_long(), reason="long crash suite: PULSAR_AUDIT_RELIABILITY=long")
def test_long_crash_suite(spark, reference: Reference):
    """A fresh job killed at each point (the stage points first), each rerun and compared."""
    wanted = int(os.environ.get("PULSAR_AUDIT_KILL_POINTS", "24"))
    spread_points = spread(reference.points, max(wanted, LONG_MIN_POINTS))
    chosen = [*STAGE_POINTS, *[p for p in spread_points if p not in STAGE_POINTS]]
    outcomes = [crash_and_rerun(spark, reference, [p], f"long-{i}") for i, p in enumerate(chosen)]
    failed = [o for o in outcomes if "error" in o]
    stages = sorted({p.split(":")[1] for p in chosen})
    record_figure(
        "crash",
        {
            "mode": "one kill per job",
            "points_passed_by_a_clean_run": len(reference.points),
            "kill_points_tried": len(outcomes),
            "identical": len(outcomes) - len(failed),
            "points": chosen,
            "tables_or_stages": stages,
            "failures": failed,
        },
    )
    assert not failed, failed


def test_points_file_lists_every_stage(reference: Reference):
    """The clean run passed the points of every stage (the long suite picks among them)."""
    stages = {p.rsplit(":", 1)[0] for p in reference.points}
    for expected in (
        "stage:ingest traces",
        "stage:ingest logs and ZooKeeper captures",
        "stage:pipeline",
        "stage:infrastructure timeline",
        "stage:causes",
        "stage:alerts",
        "commit:run_summary",
        "commit:infra_events",
    ):
        assert expected in stages, sorted(stages)
