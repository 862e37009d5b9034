"""Inputs named as URIs: `file:` URIs, names with spaces, '+' and non-ASCII characters, and a
directory tree give the same bronze tables (recorded paths included) as plain paths.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.inputs import classify, list_inputs
from jobs.ingest import ingest_infrastructure, ingest_traces
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.storage import FileStat, FileStore, local_form, segments

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Columns that differ between two ingests of the same files by nature (ids and clocks).
PER_INGEST = ("ingest_id", "ingested_at", "quarantined_at")
TABLES = ("producer_events", "consumer_events", "run_files", "ingested_files", "broker_log")


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    """A capture folder whose names need escaping in a URI, with files two levels down."""
    root = tmp_path / "landing zone ü+ñ"
    (root / "run a" / "deeper" / "ß dir").mkdir(parents=True)
    (root / "logs" / "broker").mkdir(parents=True)
    shutil.copy(FIXTURES / "traces" / "run-a.jsonl", root / "run a" / "run-a.jsonl")
    shutil.copy(
        FIXTURES / "traces" / "run-a-consumer.jsonl.gz",
        root / "run a" / "deeper" / "ß dir" / "run-a consumer.jsonl.gz",
    )
    shutil.copy(
        FIXTURES / "logs" / "pulsar-broker-broker-1.log",
        root / "logs" / "broker" / "pulsar-broker-broker-1.log",
    )
    return root


def _lakehouse(spark, tmp_path: Path, name: str) -> Lakehouse:
    return Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / name)))


def _ingest(lakehouse: Lakehouse, path: str) -> tuple[int, dict[str, int]]:
    is_folder, inputs = list_inputs(lakehouse, path)
    assert is_folder
    traces = ingest_traces(lakehouse, path, listed=inputs.traces)
    return traces.files, ingest_infrastructure(lakehouse, path, inputs=inputs)


def _table(lakehouse: Lakehouse, table: str) -> DataFrame:
    """The table without its per-ingest columns; maps as sorted entries (set operations)."""
    df = lakehouse.read(table)
    columns = [
        F.array_sort(F.map_entries(f.name)).alias(f.name)
        if isinstance(f.dataType, T.MapType)
        else F.col(f.name)
        for f in df.schema.fields
        if f.name not in PER_INGEST
    ]
    return df.select(*columns)


def _same(left: DataFrame, right: DataFrame) -> bool:
    """Order-free equality, computed in Spark."""
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


def test_local_form_and_segments_of_paths_and_uris():
    assert local_form("/a b/c") == "/a b/c"
    assert local_form("file:/a b/c") == local_form("file:///a b/c") == "/a b/c"
    assert local_form("file://localhost/a") == "/a"
    assert local_form("file://otherhost/a") is None
    assert local_form("dbfs:/Volumes/c/s/v/x") is None
    assert segments("s3a://bucket/landing/logs/broker/b.log") == [
        "landing",
        "logs",
        "broker",
        "b.log",
    ]
    assert segments("dbfs:/Volumes/c/s/v") == ["Volumes", "c", "s", "v"]


def test_classify_finds_logs_only_inside_a_logs_folder_below_the_root():
    files = [
        "s3a://b/land/t.jsonl",
        "s3a://b/land/x/logs/broker/deep/b1.log",
        "s3a://b/land/logs/client/c.log",
        "s3a://b/land/logs/other/o.log",
        "s3a://b/land/cap.zk.jsonl",
        "s3a://b/land/notes.txt",
    ]
    found = classify("s3a://b/land", files, str)
    assert found.traces == ["s3a://b/land/t.jsonl"]
    assert found.zk == ["s3a://b/land/cap.zk.jsonl"]
    assert found.logs == {
        "broker": ["s3a://b/land/x/logs/broker/deep/b1.log"],
        "client": ["s3a://b/land/logs/client/c.log"],
    }
    # the root itself may be the logs/ folder, but not logs/<source>/ (as before)
    assert classify("/r/logs", ["/r/logs/bookie/k.log"], str).logs == {
        "bookie": ["/r/logs/bookie/k.log"]
    }
    assert classify("/r/logs/bookie", ["/r/logs/bookie/k.log"], str).logs == {}


def test_file_store_lists_hashes_and_names_files_alike_in_every_form(spark, landing: Path):
    store = FileStore(spark)
    plain = store.list_files(str(landing))
    assert [f.path for f in plain] == sorted(
        os.path.realpath(os.path.join(d, f)) for d, _, fs in os.walk(landing) for f in fs
    )
    for form in (f"file://{landing}", f"file:{landing}", f"{landing}/run a/.."):
        assert store.list_files(form) == plain, form
        assert store.normalize(form) == os.path.realpath(landing)
    trace = next(f for f in plain if f.name == "run-a.jsonl")
    assert trace.uri == f"file:{trace.path}" and trace.size_bytes == os.stat(trace.path).st_size
    assert store.sha256(trace) == hashlib.sha256(Path(trace.path).read_bytes()).hexdigest()
    # the JVM's input stream (how every other scheme is read) gives the same digest
    through_jvm = FileStat(trace.path, trace.path, trace.size_bytes, trace.modified_ms)
    assert store.sha256(through_jvm) == store.sha256(trace)


# long tier; in the default run: test_file_store_lists_hashes_and_names_files_alike_in_every_form
@pytest.mark.long
def test_file_uris_and_odd_names_give_the_same_tables_as_plain_paths(spark, tmp_path, landing):
    by_path, by_uri = _lakehouse(spark, tmp_path, "lh-path"), _lakehouse(spark, tmp_path, "lh-uri")
    files, infra = _ingest(by_path, str(landing))
    assert files == 2 and infra["log_files"] == 1  # the tree: one trace two levels down
    assert _ingest(by_uri, f"file://{landing}") == (files, infra)
    for table in TABLES:
        expected = _table(by_path, table)
        assert expected.count() > 0, table
        assert _same(_table(by_uri, table), expected), table
    # recorded paths are the plain absolute paths, decoded, whatever form named the folder
    recorded = {r["path"] for r in by_uri.read("ingested_files").select("path").collect()}
    assert recorded == {
        os.path.realpath(p)
        for p in (
            landing / "run a" / "run-a.jsonl",
            landing / "run a" / "deeper" / "ß dir" / "run-a consumer.jsonl.gz",
            landing / "logs" / "broker" / "pulsar-broker-broker-1.log",
        )
    }
    sources = {
        r[0] for r in by_uri.read("producer_events").select("source_file").distinct().collect()
    }
    assert sources <= recorded and sources
    # the same files named another way are the same files: nothing is ingested again
    assert _ingest(by_path, f"file:{landing}")[0] == 0
