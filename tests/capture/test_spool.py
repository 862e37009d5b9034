"""The trace spool: what it reported durable survives a SIGKILL of the writing process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from capture.spool import Spool, read_events, seal_open

# Writes events as fast as it can and prints the durable count after every fsync.
WRITER = """
import sys
from capture.spool import Spool
spool = Spool(sys.argv[1], sync_events=500, sync_interval_s=0.05, segment_events=3000,
              on_sync=lambda n: print(n, flush=True))
i = 0
while True:
    spool.write({"seq": i, "pad": "x" * 50})
    i += 1
"""


def _killed_writer(code: str, folder: Path, enough: Callable[[int], bool]) -> int:
    """Run writer `code` on `folder` until `enough(durable count)`, SIGKILL it; the last
    durable count it reported."""
    writer = subprocess.Popen(
        [sys.executable, "-c", code, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    reported = 0
    deadline = time.monotonic() + 60
    while not enough(reported) and time.monotonic() < deadline:
        reported = int(writer.stdout.readline())
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    assert writer.returncode == -signal.SIGKILL
    assert enough(reported)
    return reported


def test_events_reported_durable_survive_sigkill(tmp_path: Path) -> None:
    reported = _killed_writer(WRITER, tmp_path, lambda durable: durable >= 20_000)

    events = read_events(tmp_path)  # every line parses: no half-written event
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(len(seqs)))  # in order, no gap, no repeat
    assert len(seqs) >= reported
    assert len(list(tmp_path.glob("*.jsonl"))) >= 6  # rotated at 3000 events per segment


def test_close_syncs_everything_and_idle_writes_are_synced_by_time(tmp_path: Path) -> None:
    synced: list[int] = []
    spool = Spool(tmp_path, sync_events=1000, sync_interval_s=0.05, on_sync=synced.append)
    spool.write({"seq": 0})
    deadline = time.monotonic() + 5
    while not synced and time.monotonic() < deadline:
        time.sleep(0.01)
    assert synced == [1]  # the background tick synced a lone event well before 1000 arrived
    spool.write({"seq": 1})
    spool.close()
    assert spool.durable == 2
    lines = (tmp_path / "trace-00000.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [0, 1]
    assert os.stat(tmp_path / "trace-00000.jsonl").st_size > 0


def test_an_empty_spool_leaves_an_empty_segment(tmp_path: Path) -> None:
    with Spool(tmp_path, prefix="run") as spool:
        assert spool.durable == 0
    assert read_events(tmp_path) == []
    assert [p.name for p in tmp_path.iterdir()] == ["run-00000.jsonl"]


# Writes events at a steady pace into a rolling spool and prints the durable count.
ROLLING_WRITER = """
import sys, time
from capture.spool import Spool
spool = Spool(sys.argv[1], prefix="trace-r", sync_interval_s=0.02, roll_s=0.2,
              on_sync=lambda n: print(n, flush=True))
i = 0
while True:
    spool.write({"seq": i})
    i += 1
    time.sleep(0.001)
"""


def test_a_rolling_spool_moves_whole_segments_into_place_in_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path, prefix="trace-r", sync_interval_s=0.02, roll_s=0.1)
    seen: list[list[str]] = []  # the final names there after each write
    for seq in range(40):
        spool.write({"seq": seq})
        time.sleep(0.01)
        seen.append(sorted(p.name for p in tmp_path.glob("*.jsonl")))
        for path in tmp_path.glob("*.jsonl"):  # a file under its final name is whole, for good
            assert path.read_text().endswith("\n")
    rolled_during = seen[-1]
    spool.close()
    final = sorted(p.name for p in tmp_path.iterdir())

    assert len(rolled_during) >= 2, seen  # files appeared while it was still writing
    assert rolled_during == final[: len(rolled_during)]  # rolled files stay as they were
    assert final == [f"trace-r-{i:05d}.jsonl" for i in range(len(final))]  # no gap, no .open
    assert spool.segments == [tmp_path / name for name in final]
    assert [event["seq"] for event in read_events(tmp_path)] == list(range(40))


def test_a_rolling_spool_rolls_only_segments_with_events(tmp_path: Path) -> None:
    spool = Spool(tmp_path, prefix="trace-r", sync_interval_s=0.02, roll_s=0.05)
    spool.write({"seq": 0})
    time.sleep(0.3)  # rolled once, then idle: nothing more to roll
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["trace-r-00000.jsonl", "trace-r-00001.jsonl.open"]
    spool.close()  # the empty open segment is removed, not rolled
    assert [p.name for p in tmp_path.iterdir()] == ["trace-r-00000.jsonl"]


def test_a_killed_rolling_writer_s_open_segment_is_sealed_whole(tmp_path: Path) -> None:
    def enough(durable: int) -> bool:  # and two segments rolled in already
        return durable >= 300 and len(list(tmp_path.glob("*.jsonl"))) >= 2

    reported = _killed_writer(ROLLING_WRITER, tmp_path, enough)
    # one open segment, or none when the kill fell inside a roll: after the last segment's
    # rename, before the next one's creation (the roll reports its sync just before it)
    left_open = list(tmp_path.glob("*.open"))
    assert len(left_open) <= 1, left_open

    sealed = seal_open(tmp_path, "trace-r")

    assert sealed == [tmp_path / path.name.removesuffix(".open") for path in left_open]
    assert not list(tmp_path.glob("*.open"))
    seqs = [event["seq"] for event in read_events(tmp_path)]  # every line parses
    assert seqs == list(range(len(seqs)))
    assert len(seqs) >= reported
