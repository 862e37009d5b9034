"""DeferredLakehouse: the same calls as Lakehouse, read-your-writes from memory, one commit per
table at the end, Delta's own refusals kept. Real Delta tables under tmp_path."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from pulsar_audit.deferred import DeferredLakehouse, defers
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.delta_log import local_table_state
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import QUARANTINE
from pulsar_audit.spark import release

AT = datetime(2026, 1, 1)


def state_rows(spark, rows: list[tuple[str, str]]):
    return spark.createDataFrame(
        [(run, fingerprint, AT) for run, fingerprint in rows],
        "run_id string, input_fingerprint string, computed_at timestamp",
    )


def table_scans(df) -> int:
    """How many leaves of `df`'s plan read a table's files (a Delta table's snapshot, its
    file filtering and scan), not frames in memory."""
    leaves = df._jdf.queryExecution().analyzed().collectLeaves()
    names = [leaves.apply(i).getClass().getSimpleName() for i in range(leaves.size())]
    return names.count("LogicalRelation")


def content(df) -> list[tuple[str, str]]:
    return sorted((r.run_id, r.input_fingerprint) for r in df.collect())


def version(lakehouse: Lakehouse, table: str) -> int:
    return local_table_state(Path(lakehouse.location(table))).version


@pytest.fixture
def plain(lakehouse: Lakehouse) -> Lakehouse:
    lakehouse.create_all()
    return lakehouse


def test_writes_wait_for_commit_and_reads_see_them(spark, plain: Lakehouse):
    job = DeferredLakehouse(plain)
    assert (
        job.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r2", "b")]), ["r1", "r2"])
        == 2
    )
    assert job.replace_runs("run_state", state_rows(spark, [("r1", "c")]), ["r1"]) == 1
    assert content(job.read("run_state")) == [("r1", "c"), ("r2", "b")]
    assert version(plain, "run_state") == 0 and content(plain.read("run_state")) == []
    job.commit()
    # a table empty when the job began: its rows appended in one commit
    assert version(plain, "run_state") == 1
    assert content(plain.read("run_state")) == [("r1", "c"), ("r2", "b")]
    assert job.committed_alone()
    job.release()


def test_replaces_of_a_table_with_rows_are_one_replace_where(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r9", "z")]), ["r1", "r9"])
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, [("r1", "b")]), ["r1"])
    job.replace_runs("run_state", state_rows(spark, [("r2", "c")]), ["r2"])
    job.update_changed(
        "run_state", state_rows(spark, [("r9", "y"), ("r2", "d")]), ["input_fingerprint"]
    )
    assert content(job.read("run_state")) == [("r1", "b"), ("r2", "d"), ("r9", "y")]
    job.commit()
    # the replaces coalesced into one commit; the update of r2 folded into it, of r9 a MERGE
    assert version(plain, "run_state") == 1 + 2
    assert content(plain.read("run_state")) == [("r1", "b"), ("r2", "d"), ("r9", "y")]
    assert job.committed_alone()
    job.release()


def commit_operation(lakehouse: Lakehouse, table: str, at: int) -> tuple[str, str | None]:
    """The operation and its mode that wrote version `at` of `table` (its commitInfo)."""
    log_file = Path(lakehouse.location(table)) / "_delta_log" / f"{at:020d}.json"
    actions = [json.loads(line) for line in log_file.read_text().splitlines() if line]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return info["operation"], info["operationParameters"].get("mode")


def test_a_replace_no_committed_row_can_match_is_an_append(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r3", "c")]), ["r1", "r3"])
    job = DeferredLakehouse(plain)
    # r2 sorts between the file's r1 and r3: its statistics cannot rule it out
    job.replace_runs("run_state", state_rows(spark, [("r2", "b")]), ["r2"])
    job.commit()
    assert commit_operation(plain, "run_state", 2) == ("WRITE", "Overwrite")
    job.release()
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, [("r4", "d")]), ["r4"])  # above them all
    job.commit()
    assert commit_operation(plain, "run_state", 3) == ("WRITE", "Append")
    assert job.committed_alone()
    job.release()
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, []), ["r0"])  # nothing to remove or add
    job.commit()
    assert version(plain, "run_state") == 3  # no commit
    job.release()
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, []), ["r0"])
    job.replace_runs("run_state", state_rows(spark, []), ["r1"])  # with r1's rows removed
    job.commit()
    assert version(plain, "run_state") == 4
    assert commit_operation(plain, "run_state", 4) == ("WRITE", "Overwrite")
    assert content(plain.read("run_state")) == [("r2", "b"), ("r3", "c"), ("r4", "d")]
    job.release()


def test_a_replace_after_another_writer_committed_stays_a_replace(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r1", "a")]), ["r1"])
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, [("r5", "e")]), ["r5"])
    # another job's commit since this one began: its statistics are not this job's to trust
    plain.replace_runs("run_state", state_rows(spark, [("r5", "x")]), ["r5"])
    job.commit()
    assert commit_operation(plain, "run_state", 3) == ("WRITE", "Overwrite")
    assert content(plain.read("run_state")) == [("r1", "a"), ("r5", "e")]
    assert not job.committed_alone()
    job.release()


def test_merges_are_one_merge_and_empty_writes_no_commit(spark, plain: Lakehouse):
    job = DeferredLakehouse(plain)
    job.merge("run_state", state_rows(spark, [("r1", "a")]))
    job.merge("run_state", state_rows(spark, [("r1", "b"), ("r2", "c")]))
    job.replace_runs("delivery", spark.createDataFrame([], plain.spec("delivery").schema), ["r1"])
    assert content(job.read("run_state")) == [("r1", "b"), ("r2", "c")]
    job.commit()
    assert content(plain.read("run_state")) == [("r1", "b"), ("r2", "c")]
    assert version(plain, "run_state") == 1
    assert version(plain, "delivery") == 0  # nothing to add to an empty table
    job.release()


def test_a_row_outside_the_replaced_runs_is_refused(spark, plain: Lakehouse):
    job = DeferredLakehouse(plain)
    with pytest.raises(ValueError, match=r"1 row\(s\) to write fall outside the rows replaced"):
        job.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r2", "b")]), ["r1"])
    job.release()


def local_state_rows(spark, rows: list[tuple[str, str]]):
    return local_frame(spark, [(run, fp, AT) for run, fp in rows], state_rows(spark, []).schema)


def test_rows_held_in_a_local_frame_are_pended_without_a_job(spark, plain: Lakehouse):
    job = DeferredLakehouse(plain)
    job.read("run_state")  # the table's state taken before the job group below
    with pytest.raises(ValueError, match=r"1 row\(s\) to write fall outside the rows replaced"):
        job.replace_runs("run_state", local_state_rows(spark, [("r1", "a"), ("r2", "b")]), ["r1"])
    spark.sparkContext.setJobGroup("local-rows", "pending writes of local frames")
    try:
        rows = local_state_rows(spark, [("r1", "a"), ("r2", "b")])
        assert job.replace_runs("run_state", rows, ["r1", "r2"]) == 2
        assert job.append("run_state", local_state_rows(spark, [("r3", "c")])) == 1
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("local-rows") == []
    assert content(job.read("run_state")) == [("r1", "a"), ("r2", "b"), ("r3", "c")]
    job.commit()
    assert content(plain.read("run_state")) == [("r1", "a"), ("r2", "b"), ("r3", "c")]
    job.release()


def test_stage_fingerprints_are_taken_after_the_data_commits(spark, plain: Lakehouse):
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, [("r1", "a")]), ["r1"])
    job.record_stage("gold", lambda: str(job.versions(["run_state"])["run_state"]))
    assert not job.stage_is_current("gold", "1")  # recorded by this job: never current in it
    job.commit()
    assert plain.stage_is_current("gold", "1")
    job.release()


def test_committed_alone_sees_another_writer(spark, plain: Lakehouse):
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, [("r1", "a")]), ["r1"])
    job.commit()
    plain.replace_runs("run_state", state_rows(spark, [("r2", "b")]), ["r2"])
    assert not job.committed_alone()
    job.release()


def test_a_table_committed_behind_takes_no_more_writes(spark, plain: Lakehouse):
    offsets = spark.createDataFrame(
        [("broker-1", 0.0, 3, 1.5, "")],
        "host string, offset_ms double, matches long, spread_ms double, pairings string",
    )
    job = DeferredLakehouse(plain)
    job.overwrite("clock_offsets", offsets)
    job.replace_runs("run_state", state_rows(spark, [("r1", "a")]), ["r1"])
    job.commit_behind(job.pending())
    assert job.pending() == ["run_state"]  # a state table waits for the end
    with pytest.raises(RuntimeError, match="written again after the job committed it"):
        job.overwrite("clock_offsets", offsets)
    job.commit()
    assert [r.host for r in plain.read("clock_offsets").collect()] == ["broker-1"]
    assert [r.host for r in job.read("clock_offsets").collect()] == ["broker-1"]
    assert content(plain.read("run_state")) == [("r1", "a")]
    job.release()


def test_only_small_local_inputs_defer(plain: Lakehouse):
    assert defers(plain, 1000)
    assert not defers(plain, None)  # not a local input
    assert not defers(plain, 2 << 30)


def test_an_idempotent_insert_is_refused_before_anything_is_pending(spark, plain: Lakehouse):
    job = DeferredLakehouse(plain)
    with pytest.raises(TypeError, match="insert_new.'run_state'. on a deferred lakehouse"):
        job.insert_new("run_state", state_rows(spark, [("r1", "a")]))
    assert job.pending() == []
    job.commit()
    assert version(plain, "run_state") == 0 and content(plain.read("run_state")) == []
    job.release()


def test_rows_a_pending_replace_covers_are_read_without_the_table(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r9", "z")]), ["r1", "r9"])
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, [("r1", "b"), ("r2", "c")]), ["r1", "r2"])

    covered = job.read_matching("run_state", {"run_id": ["r1"]})
    assert content(covered) == [("r1", "b")]  # the committed ("r1", "a") is replaced
    assert covered.inputFiles() == []  # no file of the table read
    assert job.held_in_memory("run_state", {"run_id": ["r1"]})
    # r9 is not among the replaced runs: its committed rows are read from the table
    partly = job.read_matching("run_state", {"run_id": ["r1", "r9"]})
    assert content(partly) == [("r1", "b"), ("r9", "z")]
    assert partly.inputFiles() != []
    assert not job.held_in_memory("run_state", {"run_id": ["r1", "r9"]})
    assert not plain.held_in_memory("run_state", {"run_id": ["r1"]})  # a plain one reads Delta
    job.commit()
    # what was read is what the table holds once committed
    assert content(plain.read_matching("run_state", {"run_id": ["r1"]})) == [("r1", "b")]
    job.release()


def test_a_computed_overwrite_is_pended_as_it_is_and_left_to_its_caller(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r9", "z")]), ["r9"])
    rows = state_rows(spark, [("r1", "a"), ("r2", "b")]).localCheckpoint(eager=True)
    job = DeferredLakehouse(plain)
    job.overwrite_computed("run_state", rows)
    assert content(job.read("run_state")) == [("r1", "a"), ("r2", "b")]
    job.commit()
    assert content(plain.read("run_state")) == [("r1", "a"), ("r2", "b")]
    job.release()
    # the caller's checkpoint outlives the job's release (a watch keeps its state rows)
    blocks = rows.rdd.context._jsc.sc().getRDDStorageInfo()
    kept_ids = {blocks[i].id() for i in range(len(blocks))}
    assert rows._jdf.queryExecution().analyzed().rdd().id() in kept_ids
    assert content(rows) == [("r1", "a"), ("r2", "b")]
    release(rows)


def test_a_known_empty_replace_pends_no_rows_and_still_removes(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r9", "z")]), ["r1", "r9"])
    none = local_frame(spark, [], plain.spec("run_state").schema)
    # a plain lakehouse commits the replace of r1's rows by none, counted 0
    assert plain.replace_runs("run_state", none, ["r1"]) == 0
    assert content(plain.read("run_state")) == [("r9", "z")]
    job = DeferredLakehouse(plain)
    job.read("run_state")  # the table's state taken before the job group below
    spark.sparkContext.setJobGroup("known-empty", "a pending replace by no rows")
    try:
        assert job.replace_runs("run_state", none, ["r9"]) == 0
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    # a local frame of no rows has no partition: pended without a Spark job
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("known-empty") == []
    assert content(job.read("run_state")) == []
    job.commit()
    assert content(plain.read("run_state")) == []
    job.release()


def test_rows_the_committed_statistics_rule_out_are_read_without_the_table(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r9", "z")]), ["r1", "r9"])
    job = DeferredLakehouse(plain)
    # nothing pending yet: a run the file's statistics rule out has no row, read without it
    untouched = job.read_matching("run_state", {"run_id": ["s5"]})
    assert content(untouched) == [] and table_scans(untouched) == 0
    assert content(job.read_matching("run_state", {"run_id": ["r9"]})) == [("r9", "z")]
    job.append("run_state", state_rows(spark, [("s5", "x"), ("r5", "y")]))  # replaces nothing

    new_run = job.read_matching("run_state", {"run_id": ["s5"]})
    assert content(new_run) == [("s5", "x")]
    assert table_scans(new_run) == 0  # "s5" sorts above the file's run ids: no Delta read
    # "r5" sorts between the file's smallest and largest run id: the file may hold it
    inside = job.read_matching("run_state", {"run_id": ["r5"]})
    assert content(inside) == [("r5", "y")]
    assert table_scans(inside) == 1
    job.commit()
    assert content(plain.read_matching("run_state", {"run_id": ["s5", "r5"]})) == [
        ("r5", "y"),
        ("s5", "x"),
    ]
    job.release()


def files_read(df) -> int:
    """How many files the table scans of `df` read (collected first: a scan's own count)."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    if plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
        plan = plan.finalPhysicalPlan()
    scans = plan.collectLeaves()
    counts = [scans.apply(i).metrics().get("numFiles") for i in range(scans.size())]
    return sum(c.get().value() for c in counts if c.isDefined())


def refused(spark, run_id: str | None, line: int, file: str = "/t.jsonl"):
    """One bronze.quarantine row (its run_id may be null: a record without one)."""
    row = ("producer_events", run_id, file, line, "{}", "bad", "trace_format", "i1")
    return local_frame(spark, [(*row, datetime(2026, 1, 1))], QUARANTINE)


def test_matching_rows_are_read_from_the_files_that_may_hold_them(spark, plain: Lakehouse):
    # three commits, one file each: only r2's file holds r2 (its statistics rule out the
    # others). quarantine.run_id may be null: the match must still reach the file skipping.
    for line, run in enumerate(["r1", "r2", "r3"], 1):
        plain.append("quarantine", refused(spark, run, line))
    assert files_read(plain.read("quarantine")) == 3
    assert files_read(plain.read_matching("quarantine", {"run_id": ["r2"]})) == 1
    # a deferred job's pending rows over the committed table: the committed part as well
    job = DeferredLakehouse(plain)
    job.replace_where(
        "quarantine", refused(spark, None, 4, "/u.jsonl"), {"source_file": ["/u.jsonl"]}
    )
    assert files_read(job.read_matching("quarantine", {"run_id": ["r2"]})) == 1
    matched = job.read_matching("quarantine", {"run_id": ["r2", "r3"]})
    assert sorted(r.line_number for r in matched.collect()) == [2, 3]
    job.release()


def test_rows_after_a_merge_are_read_with_the_table(spark, plain: Lakehouse):
    plain.replace_runs("run_state", state_rows(spark, [("r1", "a"), ("r9", "z")]), ["r1", "r9"])
    job = DeferredLakehouse(plain)
    job.replace_runs("run_state", state_rows(spark, [("r1", "b")]), ["r1"])
    job.merge("run_state", state_rows(spark, [("r1", "m"), ("r9", "y")]), ["run_id"])
    # a merge is not reasoned about: the pending writes over the table, as `read` gives them
    assert content(job.read_matching("run_state", {"run_id": ["r1"]})) == [("r1", "m")]
    assert content(job.read_matching("run_state", {"run_id": ["r9"]})) == [("r9", "y")]
    job.commit()
    assert content(plain.read("run_state")) == [("r1", "m"), ("r9", "y")]
    job.release()


def test_may_hold_answers_from_the_checksum_without_spark(spark, plain: Lakehouse):
    assert not plain.may_hold("run_state", [{"run_id": ["r1"]}])  # created, no rows
    plain.replace_runs("run_state", state_rows(spark, [("r2", "a"), ("r5", "b")]), ["r2", "r5"])
    # one file, run_id from r2 to r5: r1 and r7 sort outside it, r3 inside
    assert not plain.may_hold("run_state", [{"run_id": ["r1", "r7"]}])
    assert plain.may_hold("run_state", [{"run_id": ["r3"]}])
    assert not plain.may_hold("clock_offsets", [{"run_id": ["r1"]}])  # no rows written
    job = DeferredLakehouse(plain)
    job.append("run_state", state_rows(spark, [("r1", "c")]))
    assert job.may_hold("run_state", [{"run_id": ["r7"]}])  # pending rows: anything
    job.release()
