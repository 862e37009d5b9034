"""A watch killed between the last two commits of a micro-batch (the ingest manifest and the
live state, committed side by side: pulsar_audit/deferred.py `LATE_TABLES`) goes on from
either without doubling anything. Here the live state lands and the manifest does not (its
commit fails, as a kill would leave it); the restarted watch's first micro-batch, the
replay, takes the file in again (the same rows, replaced), finds the micro-batch in the
state and does not fold it twice, and judges what the state shows. (Manifest in, state not,
is the replay the fold has always had: `tests/pipelines/test_live_fold_batch.py`.) Real
Spark and Delta; `Watch.on_batch` called as the streaming query calls it, one small chunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_trace import RUN, write_chunk
from pyspark.sql import functions as F
from watch_results import findings

from jobs.live import Watch, WatchOptions, provisional_rows
from pipelines.live_state import state_part
from pulsar_audit.deferred import DeferredLakehouse
from pulsar_audit.local_frames import local_frame


def _rows(lakehouse, table: str, path: Path) -> int:  # noqa: ANN001
    return lakehouse.read(table).filter(F.col("source_file").endswith(path.name)).count()


def test_a_watch_killed_after_the_state_landed_but_not_the_manifest_folds_nothing_twice(
    lakehouse, config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lakehouse.create_all()
    landing = tmp_path / "landing"
    options = WatchOptions(checkpoint=str(tmp_path / "checkpoint"), once=True)
    path = write_chunk(landing, 1)
    batch = local_frame(lakehouse.spark, [(str(path),)], "path string")

    commit_table = DeferredLakehouse._commit_table

    def manifest_lost(self: DeferredLakehouse, table: str) -> None:
        if table == "ingested_files":
            raise RuntimeError("killed before the manifest's commit")
        commit_table(self, table)

    monkeypatch.setattr(DeferredLakehouse, "_commit_table", manifest_lost)
    with pytest.raises(RuntimeError, match="killed before the manifest"):
        Watch(lakehouse, config, landing, options).on_batch(batch, 0)
    monkeypatch.undo()

    # what the kill left: the bronze rows and the state written, the file not in the manifest
    produced, consumed = (
        _rows(lakehouse, "producer_events", path),
        _rows(lakehouse, "consumer_events", path),
    )
    assert produced > 0 and consumed > 0
    assert lakehouse.read("ingested_files").count() == 0
    state_version = lakehouse.versions(["live_state"])["live_state"]
    [folded] = state_part(lakehouse.read("live_state"), "live_runs").collect()
    assert (folded["run_id"], folded["folded_batch"]) == (RUN, 0)
    assert provisional_rows(lakehouse, [RUN]) == []  # judged only once committed

    # the restarted watch: its first micro-batch is the one the stream replays
    Watch(lakehouse, config, landing, options).on_batch(batch, 0)

    assert _rows(lakehouse, "producer_events", path) == produced  # replaced, not doubled
    assert _rows(lakehouse, "consumer_events", path) == consumed
    assert [r["path"] for r in lakehouse.read("ingested_files").collect()] == [str(path)]
    # found in the state: not folded again (no new version of it)
    assert lakehouse.versions(["live_state"])["live_state"] == state_version
    # judged from the state: chunk 1 shows the outage in progress, as without the kill
    assert findings({"provisional": provisional_rows(lakehouse, [RUN])}) == [
        ("outage_in_progress", None, 0, "open", None)
    ]
