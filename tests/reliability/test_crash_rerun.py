"""Crash anywhere, rerun, same result: `analyze` is SIGKILLed at a kill point (after a Delta
commit, or as a stage starts), run again, and every table must equal a clean run's.

Equal means: the same multiset of rows per table (order-free hash, columns that record when or
by which attempt a row was written left out), no two rows with one natural key, no row of a
file missing from the manifest or of a run without files, and read = accepted + quarantined
for every file. The default run kills at two points (the first stage and the last); the long
run (PULSAR_AUDIT_RELIABILITY=long, scripts/reliability.py) at one point of each of five
stages, then at every n-th point the clean run passed, at least 20.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
from reliability_lakehouse import (
    analyze_child,
    build_inputs,
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

from jobs.analyze import analyze
from pulsar_audit import faults
from pulsar_audit.delta_io import Lakehouse

# One point per stage: trace ingest between two tables of a batch, ZooKeeper ingest (after
# the logs), silver between two tables, the correlation stage, and alerts raised but not yet
# delivered. (The long run adds every n-th point, e.g. after a manifest, before the checks.)
STAGE_POINTS = (
    "commit:producer_events:1",
    "commit:zk_changes:1",
    "commit:message_history:1",
    "stage:causes:1",
    "commit:alerts:1",
)
# Each point costs a killed `analyze` in its own JVM and a rerun (minutes on 2 shared cores):
# the default run kills in the first stage and the last; the long run at every stage point.
DEFAULT_POINTS = ("commit:producer_events:1", "commit:alerts:1")
POINTS = STAGE_POINTS if is_long() else DEFAULT_POINTS
LONG_MIN_POINTS = 20


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Inputs, the test config and one clean reference run (its digest and its kill points)."""
    from spark_test_conf import TEST_SPARK_CONF

    root = tmp_path_factory.mktemp("crash")
    inputs = build_inputs(root / "inputs")
    conf_dir = write_conf_dir(root / "conf", TEST_SPARK_CONF)
    points_log = root / "points.log"
    reference = Lakehouse(spark, suite_config(conf_dir, root / "reference"))
    faults.reset()
    os.environ[faults.KILL_LOG_VAR] = str(points_log)
    try:
        result = analyze(reference, reference.config, inputs)
    finally:
        del os.environ[faults.KILL_LOG_VAR]
        faults.reset()
    return {
        "root": root,
        "inputs": inputs,
        "conf_dir": conf_dir,
        "result": result,
        "digest": digest(reference),
        "points": points_log.read_text().splitlines(),
    }


def test_the_clean_run_is_sound(spark, world: dict):
    """The reference itself: every kind of input landed, nothing doubled or orphaned."""
    reference = Lakehouse(spark, suite_config(world["conf_dir"], world["root"] / "reference"))
    tables = world["digest"]
    for table in ("producer_events", "broker_log", "client_log", "zk_changes", "quarantine"):
        assert tables[table][0] > 0, f"{table} is empty in the clean run"
    for table in ("message_history", "anomalies", "outages", "infra_events", "alerts"):
        assert tables[table][0] > 0, f"{table} is empty in the clean run"
    assert key_duplicates(reference) == {}
    assert orphans(reference) == {}
    assert unreconciled_files(reference) == []
    assert world["result"]["ingest"]["quarantined"] == 3  # the three bad trace lines
    missing = [p for p in STAGE_POINTS if p not in world["points"]]
    assert not missing, f"kill points the clean run never passed: {missing}"


def crash_and_rerun(spark, world: dict, point: str, name: str) -> dict[str, object]:
    """Kill `analyze` at `point`, rerun it in this process; what differs from the clean run."""
    lakehouse_dir = world["root"] / name
    killed = analyze_child(
        world["inputs"],
        lakehouse_dir,
        world["conf_dir"],
        env={faults.KILL_AT_VAR: point},
    )
    if killed.returncode != -signal.SIGKILL:
        tail = killed.stderr[-1500:]
        return {"point": point, "error": f"not killed (exit {killed.returncode}): {tail}"}
    lakehouse = Lakehouse(spark, suite_config(world["conf_dir"], lakehouse_dir))
    rerun = analyze(lakehouse, lakehouse.config, world["inputs"])
    problems: dict[str, object] = {}
    differing = differing_tables(world["digest"], digest(lakehouse))
    if differing:
        problems["differing"] = differing
    for name_, found in (
        ("duplicates", key_duplicates(lakehouse)),
        ("orphans", orphans(lakehouse)),
        ("unreconciled", unreconciled_files(lakehouse)),
    ):
        if found:
            problems[name_] = found
    if rerun["runs"] != world["result"]["runs"]:
        problems["runs"] = "the rerun's verdicts differ from the clean run's"
    return {"point": point, **({"error": json.dumps(problems, default=str)} if problems else {})}


@pytest.mark.parametrize("point", POINTS)
def test_killed_at_a_point_then_rerun_equals_the_clean_run(spark, world: dict, point: str):
    outcome = crash_and_rerun(spark, world, point, "kill-" + point.replace(":", "-"))
    assert "error" not in outcome, outcome["error"]


def spread(points: list[str], wanted: int) -> list[str]:
    """`wanted` points evenly spread over the run (first and last included)."""
    if len(points) <= wanted:
        return points
    step = (len(points) - 1) / (wanted - 1)
    return [points[round(i * step)] for i in range(wanted)]


@pytest.mark.reliability_long
@pytest.mark.skipif(not is_long(), reason="long crash suite: PULSAR_AUDIT_RELIABILITY=long")
def test_long_crash_suite(spark, world: dict):
    wanted = int(os.environ.get("PULSAR_AUDIT_KILL_POINTS", "24"))
    chosen = spread(world["points"], max(wanted, LONG_MIN_POINTS))
    outcomes = [crash_and_rerun(spark, world, p, f"long-{i}") for i, p in enumerate(chosen)]
    failed = [o for o in outcomes if "error" in o]
    stages = sorted({p.split(":")[1] for p in chosen})
    record_figure(
        "crash",
        {
            "points_passed_by_a_clean_run": len(world["points"]),
            "kill_points_tried": len(outcomes),
            "identical": len(outcomes) - len(failed),
            "points": chosen,
            "tables_or_stages": stages,
            "failures": failed,
        },
    )
    assert not failed, failed


def test_points_file_lists_every_stage(world: dict):
    """The clean run passed the points of every stage (the long suite picks among them)."""
    stages = {p.rsplit(":", 1)[0] for p in world["points"]}
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
