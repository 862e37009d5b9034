"""jobs/live.py `Watch.warm_up` on real Spark and Delta: a watch started on an empty landing
folder runs its micro-batches over the made-up run of jobs/live_warm.py in a scratch
lakehouse — raising that run's suspected loss and outage in progress, the outage with the
unload its broker's log shows, to the scratch's file sink — and leaves its own lakehouse and
the temporary folder as they were; it stops when the run's first file lands, and does not
warm up when input is there already. The whole warm-up is opt-in (`-m live_long`, about a
minute); the stop after its first micro-batch runs by default."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest

from jobs.live import Watch, WatchOptions
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse

SCRATCH = "pulsar-audit-warm-up-*"


def _watch(lakehouse: Lakehouse, config: Config, tmp_path: Path) -> Watch:
    lakehouse.create_all()
    (tmp_path / "landing").mkdir(exist_ok=True)
    options = WatchOptions(checkpoint=str(tmp_path / "checkpoint"))
    return Watch(lakehouse, config, tmp_path / "landing", options)


def _scratches() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob(SCRATCH))


@pytest.mark.live_long  # its three micro-batches: about a minute; the next test runs one
def test_a_watch_on_an_empty_folder_warms_up_on_a_made_up_run_of_its_own(
    lakehouse: Lakehouse, config: Config, tmp_path: Path
) -> None:
    watch = _watch(lakehouse, config, tmp_path)
    before = _scratches()

    warmed = watch.warm_up()

    assert warmed is not None
    assert warmed.batches == 3
    # the outage's first cause ranked from the broker's log, as a real run's: the unload begun
    assert warmed.alerts == [
        ("outage_in_progress", "bundle_unload_started"),
        ("suspected_loss", None),
    ]
    assert _scratches() == before  # its lakehouse removed
    for table in ("producer_events", "live_state", "provisional", "alerts"):
        assert lakehouse.read(table).count() == 0, table
    assert watch.done.batches == 0  # the watch's own count: none of its micro-batches


def test_the_warm_up_stops_once_the_run_lands_and_waits_for_no_input_there(
    lakehouse: Lakehouse, config: Config, tmp_path: Path
) -> None:
    watch = _watch(lakehouse, config, tmp_path)
    landed = tmp_path / "landing" / "trace-r-00000.jsonl"

    def land() -> None:  # during the warm-up's first micro-batch (seconds long)
        time.sleep(0.5)
        landed.write_text("{}\n")

    before = _scratches()
    lands = threading.Thread(target=land)
    lands.start()
    warmed = watch.warm_up()
    lands.join()

    assert warmed is not None
    assert warmed.batches == 1
    assert warmed.alerts == []  # the first micro-batch proves nothing yet
    assert _scratches() == before  # its lakehouse removed
    for table in ("producer_events", "live_state", "provisional", "alerts"):
        assert lakehouse.read(table).count() == 0, table
    assert watch.done.batches == 0
    assert watch.warm_up() is None  # input there: no warm-up
