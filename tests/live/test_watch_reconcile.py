"""`watch` reconciles an ended run after the micro-batch that saw its end, not inside it
(jobs/live_reconcile.py), and a watch killed between the two reconciles the run when it
starts again. Real Spark, real Delta: the micro-batches are `Watch.on_batch` called as the
streaming query calls it (the query itself is tested in test_watch.py). Opt-in like the other
live tests (`-m live_long`): four micro-batches and a run's pipeline, 2 min on a quiet machine,
10 at load average 15."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from live_trace import RUN, write_chunk
from watch_results import AFTER_CHUNK_3, findings

from checks.tables import TABLE_METRICS, run_metrics
from jobs.live import Watch, WatchOptions, provisional_rows
from jobs.live_reconcile import pending_runs
from pulsar_audit.local_frames import local_frame

pytestmark = pytest.mark.live_long

# what the reconciliation settles (watch_results.py) is still open after the micro-batches
NOT_RECONCILED = [
    ("out_of_order", 5, 2, "open", None),
    ("outage_in_progress", None, 0, "confirmed", 1),
    ("suspected_loss", 5, 1, "open", None),
    ("suspected_loss", 10, 1, "open", None),
]


def _checked_metrics(lakehouse) -> dict[str, str]:  # noqa: ANN001
    checks = lakehouse.read("check_results").filter("level = 'table'").collect()
    return {r.expectation: r.observed_value for r in checks if r.expectation in TABLE_METRICS}


def _whole_run_metrics(lakehouse) -> dict[str, str]:  # noqa: ANN001
    tables = ("producer_events", "consumer_events", "run_events", "quarantine")
    [row] = run_metrics(*(lakehouse.read(t) for t in tables)).collect()
    return {m: str(row[m]) for m in TABLE_METRICS}


def test_an_ended_run_noted_by_its_micro_batch_is_reconciled_by_the_restarted_watch(
    lakehouse, config, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="checks.run_checks")
    lakehouse.create_all()
    landing = tmp_path / "landing"
    options = WatchOptions(checkpoint=str(tmp_path / "checkpoint"), once=True)
    first = Watch(lakehouse, config, landing, options)
    for batch_id, number in enumerate((1, 2, 3)):
        path = write_chunk(landing, number)
        first.on_batch(local_frame(lakehouse.spark, [(str(path),)], "path string"), batch_id)

    # chunk 3 ends the run: the micro-batch noted it and returned; the watch is killed here
    assert findings({"provisional": provisional_rows(lakehouse, [RUN])}) == NOT_RECONCILED
    assert pending_runs(lakehouse) == {RUN: 2}
    assert lakehouse.read("anomalies").count() == 0
    # micro-batches 1 and 2 checked the run from their new file's rows: the whole run's metrics
    assert caplog.text.count("table checks of 1 run(s): their rows of 1 new file(s)") == 2
    assert _checked_metrics(lakehouse) == _whole_run_metrics(lakehouse)

    Watch(lakehouse, config, landing, options).reconcile_pending()  # as the restart does

    reconciled = provisional_rows(lakehouse, [RUN])
    assert findings({"provisional": reconciled}) == AFTER_CHUNK_3
    [lost] = lakehouse.read("anomalies").filter("kind = 'lost'").collect()
    assert lost.anomaly_id in {r["resolved_by"] for r in reconciled}
    assert pending_runs(lakehouse) == {}
    assert [
        (r.run_id, r.reconciled_batch) for r in lakehouse.read("live_reconciled").collect()
    ] == [(RUN, 2)]
