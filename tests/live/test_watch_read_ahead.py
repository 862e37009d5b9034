"""jobs/live.py `Watch._read_ahead` on real Delta tables: beside a micro-batch's fold, the
watch reads gold.provisional and gold.alerts as its judgement and alerts will, when the
last micro-batch's findings moved them on; the judgement then answers from the driver. A
read that fails ahead is left to the judgement's own read, which reports it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from jobs.live import Watch, WatchOptions
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import PROVISIONAL

AT = datetime(2026, 12, 2, 12, 0, 0)


def _finding(finding_id: str, run_id: str) -> dict:
    return {
        "finding_id": finding_id, "kind": "suspected_loss", "run_id": run_id, "topic": "t",
        "subscription": "s1", "partition": -1, "producer": "p1", "seq_from": 3, "seq_to": 3,
        "first_seen_batch": 0, "first_seen_at": AT, "state": "open", "explanation": "x",
    }  # fmt: skip


def test_the_findings_moved_on_are_read_beside_the_fold_not_after_it(
    lakehouse: Lakehouse,
    config,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    lakehouse.create_all()
    options = WatchOptions(checkpoint=str(tmp_path / "checkpoint"))
    watch = Watch(lakehouse, config, tmp_path / "landing", options)
    spark = lakehouse.spark
    # what the last micro-batch's judgement wrote: the table has moved on since it was read
    lakehouse.append("provisional", local_frame(spark, [_finding("f1", "r1")], PROVISIONAL))

    watch._read_ahead(["r1"])  # noqa: SLF001 - what `_take_in` runs beside the fold

    assert (watch.kept_findings.reads, watch.kept_alerts.reads) == (1, 1)
    # the judgement's and the alerts' reads: from the driver
    assert [r["finding_id"] for r in watch.kept_findings.of(lakehouse, ["r1"])] == ["f1"]
    assert watch.kept_alerts.of(lakehouse) == []
    assert (watch.kept_findings.reads, watch.kept_alerts.reads) == (1, 1)
    # no runs (a micro-batch of logs only): nothing read
    lakehouse.append("provisional", local_frame(spark, [_finding("f2", "r1")], PROVISIONAL))
    watch._read_ahead([])  # noqa: SLF001
    assert watch.kept_findings.reads == 1


def test_a_read_ahead_that_fails_is_left_to_the_judgement(spark, tmp_path: Path) -> None:  # noqa: ANN001
    # gold.provisional's log broken: reading the table fails
    config = load_config("local", lakehouse=str(tmp_path / "lh"))
    lakehouse = Lakehouse(spark, config)
    log = Path(lakehouse.location("provisional")) / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("not a Delta log\n")
    options = WatchOptions(checkpoint=str(tmp_path / "checkpoint"))
    watch = Watch(lakehouse, config, tmp_path / "landing", options)

    watch._read_ahead(["r1"])  # noqa: SLF001 - raises nothing

    assert watch.kept_findings.reads == 0
    with pytest.raises(Exception, match="(?i)json|delta|parse"):  # the judgement's own read
        watch.kept_findings.of(lakehouse, ["r1"])
