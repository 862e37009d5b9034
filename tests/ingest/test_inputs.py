"""The input folder listed once and each file hashed once per process (no Spark needed)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ingest.files import staged_prefix
from ingest.inputs import check_inputs, classify
from ingest.skeleton import hidden_folder, spark_skips
from pulsar_audit import storage
from pulsar_audit.errors import InputError, NoInputError
from pulsar_audit.storage import FileStat, local_sha256


def test_a_file_is_hashed_once_until_it_changes(tmp_path: Path, monkeypatch):
    file = tmp_path / "trace-a.jsonl"
    file.write_bytes(b'{"v":1}\n')
    os.utime(file, ns=(10**18, 10**18))  # settled: untouched since long before the read
    opened: list[str] = []
    real_open = open

    def counting_open(path, *args, **kwargs):  # noqa: ANN001, ANN202
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(storage, "open", counting_open, raising=False)
    first = local_sha256(str(file))
    assert first == hashlib.sha256(b'{"v":1}\n').hexdigest()
    assert local_sha256(str(file)) == first  # the ingest's hash serves the receipt
    assert opened == [str(file)]
    file.write_bytes(b'{"v":2}\n')  # rewritten, same size, just now: read again, not kept
    assert local_sha256(str(file)) == hashlib.sha256(b'{"v":2}\n').hexdigest()
    assert local_sha256(str(file)) == hashlib.sha256(b'{"v":2}\n').hexdigest()
    assert opened == [str(file)] * 3


def test_the_listing_gives_the_receipt_its_local_files():
    def stat(path: str, scheme: str = "file:") -> FileStat:
        return FileStat(path, f"{scheme}{path}", 1, 0)

    listed = [
        stat("/in/trace-1.jsonl"),
        stat("/in/logs/broker/b1.log"),
        stat("/in/zk/c.zk.jsonl"),
        stat("/in/notes.txt"),
    ]
    inputs = classify("/in", listed, lambda f: f.path)
    assert inputs.local_paths() == [
        Path("/in/logs/broker/b1.log"),
        Path("/in/trace-1.jsonl"),
        Path("/in/zk/c.zk.jsonl"),
    ]
    remote = classify("/in", [stat("/in/trace-1.jsonl", "s3a:")], lambda f: f.path)
    assert remote.local_paths() is None  # not on this machine: no receipt from this listing


def test_an_input_spark_would_never_read_is_refused_before_spark_starts(tmp_path: Path):
    (tmp_path / "trace-a.jsonl").write_text('{"v":1}\n')
    broker = tmp_path / "logs" / "broker"
    broker.mkdir(parents=True)
    (broker / "_broker-1.log").write_text("2026-01-01 00:00:00,000 INFO a line\n")
    with pytest.raises(InputError, match=r"logs/broker/_broker-1\.log: a file whose name begins"):
        check_inputs(tmp_path)
    (broker / "_broker-1.log").rename(broker / "broker-1.log")
    assert [p.name for p in check_inputs(tmp_path) or []] == ["broker-1.log", "trace-a.jsonl"]
    # what Spark itself still reads: `_metadata…`, `_common_metadata…`, a `_` name with a `=`
    assert [n for n in ("_metadata.x", "_common_metadata", "_a=1.jsonl") if spark_skips(n)] == []
    assert [n for n in ("_a.jsonl", ".a.parquet", "._a.jsonl") if spark_skips(n)] == [
        "_a.jsonl",
        ".a.parquet",
        "._a.jsonl",
    ]


def test_an_input_in_a_folder_spark_listings_leave_out_is_refused(tmp_path: Path):
    root = tmp_path / "_runs" / "landing"  # a hidden folder above the input folder: no matter
    root.mkdir(parents=True)
    (root / "trace-a.jsonl").write_text('{"v":1}\n')
    staging = root / "_trace-b.parquet.tmp"  # what a columnar write stopped midway leaves
    staging.mkdir()
    (staging / "part-00000.parquet").write_bytes(b"PAR1")
    (staging / "notes.txt").write_text("not an input: no matter")
    with pytest.raises(
        InputError,
        match=r"_trace-b\.parquet\.tmp/part-00000\.parquet: it lies in the folder "
        r"'_trace-b\.parquet\.tmp', whose name begins with '_' or '\.'.* remove it and the "
        r"trace-b-NNNNN\.parquet files beside it",
    ):
        check_inputs(root)
    (staging / "part-00000.parquet").unlink()
    assert [p.name for p in check_inputs(root) or []] == ["trace-a.jsonl"]
    (root / ".cache").mkdir()
    (root / ".cache" / "c.zk.jsonl").write_text("")
    with pytest.raises(InputError, match=r"'\.cache'.*: remove it, or move the inputs it holds"):
        check_inputs(root)
    # only the folders between the input folder and the file count, in either path form
    assert hidden_folder("/in", "/in/a/.b/_c/t.jsonl") == ".b"
    assert hidden_folder("/in", "/in/_t.jsonl") is None  # the file's own name: spark_skips
    assert hidden_folder("/_in", "/_in/a/t.jsonl") is None
    assert hidden_folder("s3a://b/in", "s3a://b/in/x/_temporary/0/t.parquet") == "_temporary"
    assert hidden_folder("/in", "/elsewhere/_x/t.jsonl") is None  # not under the folder
    assert [staged_prefix(n) for n in ("_t-1.parquet.tmp", "_.parquet.tmp", "t.parquet.tmp")] == [
        "t-1",
        None,
        None,
    ]


def test_an_empty_folder_is_the_no_input_error_a_watch_waits_on(tmp_path: Path):
    with pytest.raises(NoInputError, match="no trace files"):
        check_inputs(tmp_path)
