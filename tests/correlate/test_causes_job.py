"""The correlation job on real Delta tables: which findings a job ranks, and what it leaves."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from pipelines.causes_job import (
    NOT_CURRENT,
    CausesBefore,
    attach_causes,
    attach_provisional_causes,
    causes_current,
    causes_scope,
    refresh_causes,
)
from pipelines.live_state import state_rows
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import (
    INFRA_EVENTS,
    LIVE_RECONCILED,
    LIVE_RUNS,
    OUTAGES,
    PROVISIONAL,
)

T0 = datetime(2025, 3, 4, 10, 0, 0)
TOPIC = "persistent://public/default/orders"
BUNDLE = "public/default/0x40000000_0x80000000"


def _outage(outage_id: str, run_id: str) -> dict:
    end = T0 + timedelta(milliseconds=350)
    return {
        "outage_id": outage_id, "run_id": run_id, "topic": TOPIC, "partition": -1,
        "producer": "p1", "start": T0, "end": end, "duration_ms": 350.0, "in_flight": 3,
        "backoff_step": 2, "explanation": "producer p1 had 3 message(s) in flight", "causes": [],
    }  # fmt: skip


def _unload(event_type: str = "bundle_unload_started", ms: int = -10) -> dict:
    at = T0 + timedelta(milliseconds=ms)
    row = {f.name: None for f in INFRA_EVENTS.fields}
    return {
        **row, "event_id": f"e{ms}", "ts": at, "corrected_ts": at, "clock": "corrected",
        "host": "broker-1", "source": "broker", "event_type": event_type,
        "bundle": BUNDLE, "raw": "raw", "source_file": "broker.log", "line_number": 1,
    }  # fmt: skip


def _causes(lakehouse) -> dict[str, list[str]]:  # noqa: ANN001
    rows = lakehouse.read("outages").collect()
    return {r.outage_id: [c.event_type for c in r.causes] for r in rows}


@pytest.fixture
def two_runs(lakehouse, config):  # noqa: ANN001, ANN201
    """Run a's and run b's outage at the time of an unload of their topic's bundle, not ranked."""
    spark = lakehouse.spark
    lakehouse.create_all()
    lakehouse.append(
        "outages", spark.createDataFrame([_outage("oa", "a"), _outage("ob", "b")], OUTAGES)
    )
    lakehouse.append("infra_events", spark.createDataFrame([_unload()], INFRA_EVENTS))
    return lakehouse


def test_a_scoped_ranking_touches_only_the_runs_given(two_runs, config) -> None:  # noqa: ANN001
    attach_causes(two_runs, config, runs=["a"])
    assert _causes(two_runs) == {"oa": ["bundle_unload_started"], "ob": []}
    attach_causes(two_runs, config)  # every finding
    assert _causes(two_runs) == {"oa": ["bundle_unload_started"], "ob": ["bundle_unload_started"]}


def test_causes_are_current_only_after_a_complete_ranking(two_runs, config) -> None:  # noqa: ANN001
    assert not causes_current(two_runs, config)  # never ranked
    assert refresh_causes(two_runs, config, runs=None)
    assert causes_current(two_runs, config)
    # a pipeline replaced run a's findings (a job killed before its correlation): not current
    two_runs.replace_runs(
        "outages", two_runs.spark.createDataFrame([_outage("oa", "a")], OUTAGES), ["a"]
    )
    assert not causes_current(two_runs, config)
    assert _causes(two_runs) == {"oa": [], "ob": ["bundle_unload_started"]}
    # nothing changed since: refresh_causes compares and skips
    assert refresh_causes(two_runs, config, runs=None)
    assert not refresh_causes(two_runs, config)


def test_a_job_sees_whether_another_wrote_findings_since(two_runs, config) -> None:  # noqa: ANN001
    refresh_causes(two_runs, config)
    job = Lakehouse(two_runs.spark, config)
    before = CausesBefore.seen(job, config)
    assert before.current
    # the job's own pipeline replaces run a's findings: still alone
    job.replace_runs("outages", job.spark.createDataFrame([_outage("oa", "a")], OUTAGES), ["a"])
    assert before.alone_since(job)
    # another job replaces run b's findings meanwhile (and is killed before ranking them)
    other = Lakehouse(two_runs.spark, config)
    other.replace_runs("outages", job.spark.createDataFrame([_outage("ob", "b")], OUTAGES), ["b"])
    assert not before.alone_since(job)


def test_a_ranking_beside_another_writer_is_not_recorded_as_current(two_runs, config) -> None:  # noqa: ANN001
    refresh_causes(two_runs, config)
    job = Lakehouse(two_runs.spark, config)
    before = CausesBefore.seen(job, config)
    refresh_causes(job, config, changed=True, runs=["a"], before=before)  # alone: recorded
    assert causes_current(job, config)
    before = CausesBefore.seen(job, config)
    other = Lakehouse(two_runs.spark, config)  # a watch's reconciliation replaces run b's
    other.replace_runs("outages", job.spark.createDataFrame([_outage("ob", "b")], OUTAGES), ["b"])
    assert before.fingerprint_after(job, config) == NOT_CURRENT
    refresh_causes(job, config, changed=True, runs=["a"], before=before)
    assert not causes_current(job, config)  # so the next job ranks run b's outage too
    assert _causes(job) == {"oa": ["bundle_unload_started"], "ob": []}


def test_a_merge_that_changes_nothing_is_not_counted_as_a_version(two_runs) -> None:  # noqa: ANN001
    outages = two_runs.read("outages")
    [version] = two_runs.committed_versions(["outages"]).values()
    [count] = two_runs.commit_counts(["outages"]).values()  # the fixture's append: 1
    two_runs.update_changed("outages", outages, ["causes"])  # the same causes: no new version
    assert two_runs.committed_versions(["outages"]) == {"outages": version}
    assert two_runs.commit_counts(["outages"]) == {"outages": count}
    longer = outages.withColumn("duration_ms", outages.duration_ms + 1)
    two_runs.update_changed("outages", longer, ["duration_ms"])
    assert two_runs.committed_versions(["outages"]) == {"outages": version + 1}
    assert two_runs.commit_counts(["outages"]) == {"outages": count + 1}


@pytest.mark.parametrize(
    ("current_before", "rebuilt", "expected"),
    [
        (True, False, ["a"]),  # only run a's findings were replaced
        (False, False, None),  # a new lakehouse, or a job killed before its correlation
        (True, True, None),  # a new timeline can give any finding new causes
        (False, True, None),
    ],
)
def test_causes_scope(current_before: bool, rebuilt: bool, expected) -> None:  # noqa: ANN001
    assert causes_scope(current_before, rebuilt, ["a"]) == expected


def _provisional(finding_id: str, run_id: str, kind: str, state: str, **over: object) -> dict:
    row = {f.name: None for f in PROVISIONAL.fields}
    return {
        **row, "finding_id": finding_id, "kind": kind, "run_id": run_id, "topic": TOPIC,
        "partition": -1, "producer": "p1", "started_at": T0, "first_seen_batch": 1,
        "first_seen_at": T0, "state": state, "explanation": "x", "causes": [],
        "seq_from": 1 if kind == "suspected_loss" else None, **over,
    }  # fmt: skip


def _provisional_causes(lakehouse) -> dict[str, list[str]]:  # noqa: ANN001
    rows = lakehouse.read("provisional").collect()
    return {r.finding_id: [c.event_type for c in r.causes] for r in rows}


def test_provisional_findings_of_watched_runs_gain_causes_as_events_arrive(
    lakehouse,  # noqa: ANN001
    config,  # noqa: ANN001
) -> None:
    spark = lakehouse.spark
    lakehouse.create_all()
    closed = {"closed_batch": 2, "duration_ms": 1000.0}  # confirmed: its stretch was 1 s
    rows = [
        _provisional("a-outage", "a", "outage_in_progress", "open"),
        _provisional("a-closed", "a", "outage_in_progress", "confirmed", **closed),
        _provisional("a-loss", "a", "suspected_loss", "open"),
        _provisional("a-withdrawn", "a", "outage_in_progress", "withdrawn"),
        _provisional("b-outage", "b", "outage_in_progress", "open"),  # reconciled: left alone
        # folded again since its reconciliation (batch 3): its open finding is ranked, the one
        # the reconciliation confirmed keeps the batch finding's causes
        _provisional("c-open", "c", "outage_in_progress", "open"),
        _provisional("c-settled", "c", "outage_in_progress", "confirmed", closed_batch=3),
    ]
    lakehouse.append("provisional", spark.createDataFrame(rows, PROVISIONAL))
    now = T0 + timedelta(seconds=3)  # the runs' clock: the outage has lasted 3 s so far
    runs = [("a", now, 2), ("b", now, 1), ("c", now, 5)]
    lakehouse.append(
        "live_state", state_rows({"live_runs": spark.createDataFrame(runs, LIVE_RUNS)})
    )
    reconciled = [("b", 1, now), ("c", 3, now)]
    lakehouse.append("live_reconciled", spark.createDataFrame(reconciled, LIVE_RECONCILED))

    assert not attach_provisional_causes(lakehouse, config, 3)  # no log ever taken in
    # the unload (just before the outage began) and the new owner (2 s into it) arrive
    events = [_unload(), _unload("bundle_ownership_acquired", 2000)]
    lakehouse.append("infra_events", spark.createDataFrame(events, INFRA_EVENTS))
    assert attach_provisional_causes(lakehouse, config, 4)

    both = ["bundle_unload_started", "bundle_ownership_acquired"]
    assert _provisional_causes(lakehouse) == {
        # in progress: its window runs to the run's now, so the new owner counts too
        "a-outage": both,
        "a-closed": ["bundle_unload_started"],  # over after 1 s: the new owner came later
        "a-loss": [],  # an unload explains no loss
        "a-withdrawn": [],
        "b-outage": [],
        "c-open": both,
        "c-settled": [],
    }
    batches = {r.finding_id: r.causes_batch for r in lakehouse.read("provisional").collect()}
    # only the changed rows were rewritten, with the micro-batch that changed them
    assert {k for k, v in batches.items() if v is not None} == {"a-outage", "a-closed", "c-open"}
    assert set(batches.values()) == {4, None}
