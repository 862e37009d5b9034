"""capture/runlogs.py on real files: a log copied whole at the end of a run, or rolled into
whole segments while the run goes on (for `watch`), never cutting an entry from its stack
trace, and a ZooKeeper capture's rolling spool named as `ingest zk` takes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capture.runlogs import LogRoller, complete_entries, seal_live
from capture.spool import Spool, live_name
from ingest.inputs import classify
from ingest.logs import host_from_filename

ENTRY_1 = b"2026-11-28T00:00:01,000+0000 [main] INFO  org.A - one\n"
ENTRY_2 = (
    b"2026-11-28T00:00:02,000+0000 [main] WARN  org.B - two\n"
    b"java.io.IOException: gone\n\tat org.B.run(B.java:1)\n"
)
ENTRY_3 = b"2026-11-28T00:00:03,000+0000 [main] INFO  org.C - Unloading bundle x\n"


@pytest.mark.parametrize(
    ("chunk", "quiet", "expected"),
    [
        (ENTRY_1 + ENTRY_2, False, len(ENTRY_1)),  # the last entry may get more lines
        (ENTRY_1 + ENTRY_2, True, len(ENTRY_1 + ENTRY_2)),  # quiet for a roll: all of it
        (ENTRY_1 + ENTRY_2[:30], True, len(ENTRY_1)),  # never half a line
        (ENTRY_2, False, 0),  # one entry, still open
        (b"time=2026-11-28T00:00:01Z level=info msg=a\ntime=2026-11-28T00:00:02Z", False, 43),
    ],
)
def test_only_complete_entries_are_rolled(chunk: bytes, quiet: bool, expected: int) -> None:
    assert complete_entries(chunk, quiet) == expected


def _marks(source: Path, offset: int = 0) -> dict[str, dict]:
    return {"broker-1": {"component": "broker", "source": str(source), "offset": offset}}


def test_a_rolled_log_lands_in_whole_segments_that_add_up_to_the_run_s_part(
    tmp_path: Path,
) -> None:
    source = tmp_path / "cluster" / "broker-1.log"
    source.parent.mkdir()
    source.write_bytes(b"before the run\n")
    landing = tmp_path / "out" / "logs"
    roller = LogRoller(_marks(source, source.stat().st_size), landing, roll_s=3600)

    with source.open("ab") as log:
        log.write(ENTRY_1 + ENTRY_2[:60])  # entry 2 half written
        log.flush()
        roller.roll(final=False)  # entry 1 is complete: entry 2 began after it
        log.write(ENTRY_2[60:] + ENTRY_3)
        log.flush()
        roller.roll(final=False)  # entry 2 complete; entry 3 is the last: held back
        roller.roll(final=False)  # the log was quiet since: entry 3 goes too
    rows = roller.close(settle_s=0)

    segments = sorted((landing / "broker").iterdir())
    assert [p.name for p in segments] == ["broker-1.00000.log", "broker-1.00001.log",
                                          "broker-1.00002.log"]  # fmt: skip
    assert [p.read_bytes() for p in segments] == [ENTRY_1, ENTRY_2, ENTRY_3]
    assert json.loads((landing / "manifest.json").read_text()) == rows
    assert [r["file"] for r in rows] == [f"broker/{p.name}" for p in segments]
    # analyze and watch take the segments as broker-1's log
    found = classify(str(tmp_path / "out"), [str(p) for p in segments], str)
    assert found.logs == {"broker": [str(p) for p in segments]}
    assert {host_from_filename(p) for p in segments} == {"broker-1"}


def test_a_log_the_harness_writes_is_rolled_from_its_live_name_then_removed(
    tmp_path: Path,
) -> None:
    landing = tmp_path / "logs"
    client_log = live_name(landing / "client" / "client.log")
    client_log.parent.mkdir(parents=True)
    roller = LogRoller({}, landing, roll_s=3600)
    roller.add("client", "client", client_log)
    client_log.write_bytes(ENTRY_1 + ENTRY_3)
    roller.roll(final=False)
    worker_log = live_name(landing / "client" / "reader-1.0.log")  # a consumer process's
    worker_log.write_bytes(ENTRY_2)

    roller.close(settle_s=0)
    assert seal_live(landing) == [landing / "client" / "reader-1.0.log"]

    assert sorted(p.name for p in (landing / "client").iterdir()) == [
        "client.00000.log",
        "client.00001.log",
        "reader-1.0.log",
    ]
    assert (landing / "client" / "client.00001.log").read_bytes() == ENTRY_3


def test_without_rolling_the_run_s_part_is_copied_whole_at_the_end(tmp_path: Path) -> None:
    source = tmp_path / "broker-1.log"
    source.write_bytes(b"before\n")
    roller = LogRoller(_marks(source, source.stat().st_size), tmp_path / "logs")
    source.write_bytes(b"before\n" + ENTRY_1 + ENTRY_2)
    roller.close(settle_s=0)
    assert (tmp_path / "logs" / "broker" / "broker-1.log").read_bytes() == ENTRY_1 + ENTRY_2


def test_a_rolling_zookeeper_capture_writes_segments_ingest_zk_takes(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "zk", prefix="run-1", roll_s=3600, suffix=".zk.jsonl")
    spool.write({"path": "/a"})
    assert [p.name for p in (tmp_path / "zk").iterdir()] == ["run-1-00000.zk.jsonl.open"]
    spool.close()
    paths = [str(p) for p in (tmp_path / "zk").iterdir()]
    assert [Path(p).name for p in paths] == ["run-1-00000.zk.jsonl"]
    found = classify(str(tmp_path), paths, str)
    assert (found.zk, found.traces) == (paths, [])
    assert spool.rows == 1
