"""`watch` reconciles an ended run after the micro-batch that saw its end, not inside it
(jobs/live_reconcile.py), and a watch killed between the two reconciles the run when it
starts again. Real Spark, real Delta: the micro-batches are `Watch.on_batch` called as the
streaming query calls it (the query itself is tested in test_watch.py). Opt-in like the other
live tests (`-m live_long`): four micro-batches and a run's pipeline, 2 min on a quiet machine,
10 at load average 15."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_trace import RUN, write_broker_log, write_chunk
from watch_results import AFTER_CHUNK_3, findings

from checks.run_checks import EVENT_TABLES
from checks.tables import TABLE_METRICS
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


def test_an_ended_run_noted_by_its_micro_batch_is_reconciled_by_the_restarted_watch(
    lakehouse, config, tmp_path: Path
) -> None:
    lakehouse.create_all()
    landing = tmp_path / "landing"
    options = WatchOptions(checkpoint=str(tmp_path / "checkpoint"), once=True)
    first = Watch(lakehouse, config, landing, options)
    for batch_id, number in enumerate((1, 2, 3)):
        paths = [write_chunk(landing, number)]
        if number == 1:  # the broker's log of the unload comes with the first chunk
            paths.append(write_broker_log(landing))
        rows = [(str(path),) for path in paths]
        first.on_batch(local_frame(lakehouse.spark, rows, "path string"), batch_id)

    # chunk 3 ends the run: the micro-batch noted it and returned; the watch is killed here
    assert findings({"provisional": provisional_rows(lakehouse, [RUN])}) == NOT_RECONCILED
    assert pending_runs(lakehouse) == {RUN: 2}
    assert lakehouse.read("anomalies").count() == 0

    def table_checks() -> int:
        of_run = f"level = 'table' AND run_id = '{RUN}'"
        return lakehouse.read("check_results").filter(of_run).count()

    # the micro-batches gated the rows; the run's table checks wait for it to be whole
    assert table_checks() == 0
    # the outage got its causes live, in the micro-batch that opened it with the log
    [live] = [r for r in provisional_rows(lakehouse, [RUN]) if r["kind"] == "outage_in_progress"]
    assert (live["causes"][0]["event_type"], live["causes_batch"]) == ("bundle_unload_started", 0)

    Watch(lakehouse, config, landing, options).reconcile_pending()  # as the restart does

    reconciled = provisional_rows(lakehouse, [RUN])
    assert findings({"provisional": reconciled}) == AFTER_CHUNK_3
    assert table_checks() == len(TABLE_METRICS) + len(EVENT_TABLES)
    [lost] = lakehouse.read("anomalies").filter("kind = 'lost'").collect()
    assert lost.anomaly_id in {r["resolved_by"] for r in reconciled}
    # the reconciliation ranked the run's batch outage before the confirmed one took its causes
    [outage] = [r for r in reconciled if r["kind"] == "outage_in_progress"]
    [batch] = lakehouse.read("outages").filter(f"outage_id = '{outage['resolved_by']}'").collect()
    assert batch.causes and batch.causes[0].event_type == "bundle_unload_started"
    assert [c.asDict() for c in outage["causes"]] == [c.asDict() for c in batch.causes]
    assert pending_runs(lakehouse) == {}
    assert [
        (r.run_id, r.reconciled_batch) for r in lakehouse.read("live_reconciled").collect()
    ] == [(RUN, 2)]
