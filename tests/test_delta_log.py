"""pulsar_audit.delta_log: which files of a table may hold a replace's rows, from the file
statistics of its checksum (literal statistics in Delta's form, some of them beyond what
Delta 4.0.1 writes: what an older writer could have)."""

from __future__ import annotations

import json
from pathlib import Path

from pulsar_audit.delta_log import checksum_files, files_may_hold


def add(rows: int, low: dict | None = None, high: dict | None = None, nulls=None) -> dict:
    stats = {"numRecords": rows, "minValues": low or {}, "maxValues": high or {}}
    if nulls is not None:
        stats["nullCount"] = nulls
    return {"path": "part-0.parquet", "stats": json.dumps(stats)}


STRINGS = ("run_id", "source_file")
PATH = "/data/landing/traces/run-1/producer-1."
FILES = [
    add(
        10,
        {"run_id": "r1", "source_file": PATH + "00001.jsonl"},
        {"run_id": "r3", "source_file": PATH + "00003.jsonl"},
    ),
]


def test_a_value_outside_every_files_range_is_held_by_none():
    assert not files_may_hold(FILES, [{"source_file": [PATH + "00004.jsonl"]}], STRINGS)
    assert not files_may_hold(FILES, [{"run_id": ["r0", "r9"]}], STRINGS)
    assert files_may_hold(FILES, [{"source_file": [PATH + "00002.jsonl"]}], STRINGS)
    assert files_may_hold(FILES, [{"run_id": ["r9"]}, {"run_id": ["r2"]}], STRINGS)  # any match
    # every column of a match must be in range
    assert not files_may_hold(
        FILES, [{"run_id": ["r2"], "source_file": [PATH + "9.jsonl"]}], STRINGS
    )


def test_truncated_statistics_never_rule_out_a_value_they_may_hold():
    # Delta keeps a string's first characters (32 by default); a maximum truncated gains a mark
    prefix = "/data/landing/traces/run-1/produ"
    truncated = [add(5, {"source_file": prefix}, {"source_file": prefix + "\x7f"})]
    assert files_may_hold(truncated, [{"source_file": [PATH + "00009.jsonl"]}], STRINGS)
    assert files_may_hold(truncated, [{"source_file": [prefix + "\U0001f600"]}], STRINGS)
    assert not files_may_hold(
        truncated, [{"source_file": ["/data/landing/traces/run-1/prof"]}], STRINGS
    )
    assert not files_may_hold(truncated, [{"source_file": ["/data/landing/a"]}], STRINGS)
    empty_max = [add(5, {"source_file": ""}, {"source_file": ""})]
    assert files_may_hold(empty_max, [{"source_file": [""]}], STRINGS)
    assert not files_may_hold(empty_max, [{"source_file": ["x"]}], STRINGS)  # not truncated: exact


def test_files_without_statistics_may_hold_anything_and_empty_ones_nothing():
    assert files_may_hold([{"path": "a.parquet"}], [{"run_id": ["r1"]}], STRINGS)
    assert files_may_hold([add(3)], [{"run_id": ["r1"]}], STRINGS)  # no statistics of run_id
    assert not files_may_hold(
        [add(3, nulls={"run_id": 3})], [{"run_id": ["r1"]}], STRINGS
    )  # all null
    assert not files_may_hold([add(0)], [{"run_id": ["r1"]}], STRINGS)
    assert not files_may_hold([], [{"run_id": ["r1"]}], STRINGS)
    assert files_may_hold([{"stats": '{"minValues": {}}'}], [{"run_id": ["r1"]}], STRINGS)


def test_only_string_columns_are_compared():
    stamped = [add(3, {"at": "2024-01-01T00:00:00.000Z"}, {"at": "2024-01-01T00:00:00.000Z"})]
    # a timestamp's statistics are strings in another form than a match's value
    assert files_may_hold(stamped, [{"at": ["2024-01-01 00:00:00"]}], STRINGS)
    numbers = [add(3, {"level": 1, "run_id": "r1"}, {"level": 2, "run_id": "r1"})]
    assert files_may_hold(numbers, [{"level": ["7"]}], STRINGS + ("level",))
    # another column of the match rules the file out
    assert not files_may_hold(numbers, [{"at": ["x"], "run_id": ["r2"]}], STRINGS)


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
