"""pulsar_audit.delta_log: which files of a table may hold a replace's rows, from the file
statistics of its checksum (literal statistics, as Delta writes them)."""

from __future__ import annotations

import json
from pathlib import Path

from pulsar_audit.delta_log import checksum_files, files_may_hold


def add(rows: int, low: dict | None = None, high: dict | None = None, nulls=None) -> dict:
    stats = {"numRecords": rows, "minValues": low or {}, "maxValues": high or {}}
    if nulls is not None:
        stats["nullCount"] = nulls
    return {"path": "part-0.parquet", "stats": json.dumps(stats)}


PATH = "/data/landing/traces/run-1/producer-1."
FILES = [
    add(
        10,
        {"run_id": "r1", "source_file": PATH + "00001.jsonl"},
        {"run_id": "r3", "source_file": PATH + "00003.jsonl"},
    ),
]


def test_a_value_outside_every_files_range_is_held_by_none():
    assert not files_may_hold(FILES, [{"source_file": [PATH + "00004.jsonl"]}])
    assert not files_may_hold(FILES, [{"run_id": ["r0", "r9"]}])
    assert files_may_hold(FILES, [{"source_file": [PATH + "00002.jsonl"]}])
    assert files_may_hold(FILES, [{"run_id": ["r9"]}, {"run_id": ["r2"]}])  # any match
    # every column of a match must be in range
    assert not files_may_hold(FILES, [{"run_id": ["r2"], "source_file": [PATH + "9.jsonl"]}])


def test_truncated_statistics_never_rule_out_a_value_they_may_hold():
    # Delta keeps a string's first characters (32 by default); a maximum truncated gains a mark
    prefix = "/data/landing/traces/run-1/produ"
    truncated = [add(5, {"source_file": prefix}, {"source_file": prefix + "\x7f"})]
    assert files_may_hold(truncated, [{"source_file": [PATH + "00009.jsonl"]}])
    assert files_may_hold(truncated, [{"source_file": [prefix + "\U0001f600"]}])
    assert not files_may_hold(truncated, [{"source_file": ["/data/landing/traces/run-1/prof"]}])
    assert not files_may_hold(truncated, [{"source_file": ["/data/landing/a"]}])
    empty_max = [add(5, {"source_file": ""}, {"source_file": ""})]
    assert files_may_hold(empty_max, [{"source_file": [""]}])
    assert not files_may_hold(empty_max, [{"source_file": ["x"]}])  # not truncated: exact


def test_files_without_statistics_may_hold_anything_and_empty_ones_nothing():
    assert files_may_hold([{"path": "a.parquet"}], [{"run_id": ["r1"]}])
    assert files_may_hold([add(3)], [{"run_id": ["r1"]}])  # no statistics of run_id
    assert not files_may_hold([add(3, nulls={"run_id": 3})], [{"run_id": ["r1"]}])  # all null
    assert not files_may_hold([add(0)], [{"run_id": ["r1"]}])
    assert not files_may_hold([], [{"run_id": ["r1"]}])
    numbers = [add(3, {"level": 1}, {"level": 2})]  # not a string's statistics: kept
    assert files_may_hold(numbers, [{"level": ["7"]}])


def test_a_checksum_without_its_file_list_tells_nothing(tmp_path: Path):
    log_dir = tmp_path / "_delta_log"
    log_dir.mkdir()
    (log_dir / "00000000000000000003.crc").write_text(json.dumps({"numFiles": 60}))
    (log_dir / "00000000000000000004.crc").write_text(json.dumps({"allFiles": FILES}))
    (log_dir / "00000000000000000005.crc").write_text('{"allFiles": [')  # being written
    assert checksum_files(tmp_path, 3) is None
    assert checksum_files(tmp_path, 4) == FILES
    assert checksum_files(tmp_path, 5) is None
    assert checksum_files(tmp_path, 6) is None  # none written
