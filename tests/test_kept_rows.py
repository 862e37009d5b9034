"""pulsar_audit/kept_rows.py on a real Delta table: a small table's rows are read once and
answered from the driver while the table has not moved on; any commit, this process's or
another writer's, and a run not read yet make the next call read again."""

from __future__ import annotations

from datetime import datetime

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.kept_rows import KeptRows
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import RUN_FILES

AT = datetime(2026, 12, 1, 12, 0, 0)


def _add(lakehouse: Lakehouse, run: str, source: str) -> None:
    row = (run, "producer_events", source, 3, "ingest-1", AT)
    lakehouse.append("run_files", local_frame(lakehouse.spark, [row], RUN_FILES))


def _files(rows: list) -> list[tuple[str, str]]:  # noqa: ANN001
    return sorted((row["run_id"], row["source_file"]) for row in rows)


def test_rows_are_read_again_only_once_the_table_has_moved_on(lakehouse: Lakehouse) -> None:
    lakehouse.create_all()
    _add(lakehouse, "r1", "a.jsonl")
    _add(lakehouse, "r2", "b.jsonl")
    kept = KeptRows("run_files", ("run_id", "source_file"))

    assert _files(kept.of(lakehouse, ["r1"])) == [("r1", "a.jsonl")]
    assert kept.reads == 1
    assert _files(kept.of(lakehouse, ["r1"])) == [("r1", "a.jsonl")]
    assert kept.reads == 1  # the same version: from the driver

    # another writer (a plain Lakehouse of its own) commits: read again, its row seen
    Lakehouse(lakehouse.spark, lakehouse.config).append(
        "run_files",
        local_frame(
            lakehouse.spark, [("r1", "producer_events", "c.jsonl", 1, "i2", AT)], RUN_FILES
        ),
    )
    assert _files(kept.of(lakehouse, ["r1"])) == [("r1", "a.jsonl"), ("r1", "c.jsonl")]
    assert kept.reads == 2

    # a run not read yet: read again, for it and the runs read before
    assert _files(kept.of(lakehouse, ["r2"])) == [("r2", "b.jsonl")]
    assert kept.reads == 3
    assert _files(kept.of(lakehouse, ["r1", "r2"])) == [
        ("r1", "a.jsonl"),
        ("r1", "c.jsonl"),
        ("r2", "b.jsonl"),
    ]
    assert kept.reads == 3
    # every row: read again once (the runs read were some), then kept
    assert len(kept.of(lakehouse)) == 3 and kept.reads == 4
    assert _files(kept.of(lakehouse, ["r2"])) == [("r2", "b.jsonl")]
    assert kept.reads == 4


def test_what_a_caller_does_to_the_list_does_not_change_what_is_kept(lakehouse) -> None:  # noqa: ANN001
    lakehouse.create_all()
    _add(lakehouse, "r1", "a.jsonl")
    kept = KeptRows("run_files")
    rows = kept.of(lakehouse, ["r1"])
    rows += ["not a row"]
    assert _files(kept.of(lakehouse, ["r1"])) == [("r1", "a.jsonl")]
    assert kept.reads == 1


def test_a_deferred_lakehouse_is_read_as_committed(lakehouse: Lakehouse) -> None:
    from pulsar_audit.deferred import DeferredLakehouse

    lakehouse.create_all()
    _add(lakehouse, "r1", "a.jsonl")
    kept = KeptRows("run_files", ("run_id", "source_file"))
    job = DeferredLakehouse(lakehouse)
    try:
        _add(job, "r1", "b.jsonl")  # pending: not in the table's version
        assert _files(kept.of(job, ["r1"])) == [("r1", "a.jsonl")]
        job.commit()
    finally:
        job.release()
    assert _files(kept.of(lakehouse, ["r1"])) == [("r1", "a.jsonl"), ("r1", "b.jsonl")]
    assert kept.reads == 2
