"""`watch`'s file source: the format and options chosen for each `watch.source` (Auto Loader
exists only on Databricks, so its options are checked literally), the setting as each env
loads it, and the local file source on a real folder (nested files, the glob, one trigger
per `maxFilesPerTrigger`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.live_source import file_source, input_files
from pulsar_audit.config import ConfigError, load_config
from pulsar_audit.delta_io import Lakehouse

REPO = Path(__file__).resolve().parents[2]
INPUT_GLOB = "*.{jsonl,jsonl.gz,parquet,log,log.gz,out}"


def test_the_local_file_source_keeps_its_options():
    assert file_source("files", 100) == (
        "binaryFile",
        {
            "pathGlobFilter": INPUT_GLOB,
            "recursiveFileLookup": "true",
            "maxFilesPerTrigger": "100",
        },
    )


def test_auto_loader_reads_binary_files_with_the_same_glob_and_its_own_rate_limit():
    assert file_source("auto_loader", 7) == (
        "cloudFiles",
        {
            "cloudFiles.format": "binaryFile",
            "pathGlobFilter": INPUT_GLOB,
            "cloudFiles.includeExistingFiles": "true",
            "cloudFiles.maxFilesPerTrigger": "7",
        },
    )


def test_an_unknown_source_is_refused_by_name():
    with pytest.raises(ValueError, match="watch source 'kafka': expected 'files' or 'auto_loader'"):
        file_source("kafka", 1)


def test_each_env_names_its_watch_source_and_a_wrong_one_is_a_config_error(tmp_path: Path):
    assert load_config("local").watch.source == "files"
    assert load_config("standalone").watch.source == "files"
    assert load_config("databricks").watch.source == "auto_loader"
    text = (REPO / "conf/local.yaml").read_text() + "watch:\n  source: kafka\n"
    (tmp_path / "odd.yaml").write_text(text)
    expected = r"watch.source must be one of \['files', 'auto_loader'\], got 'kafka'"
    with pytest.raises(ConfigError, match=expected):
        load_config("odd", conf_dir=tmp_path)


def test_the_local_stream_hands_out_nested_input_files_once_at_most_n_per_batch(
    spark, tmp_path: Path
):
    landing = tmp_path / "landing"
    names = ("a/1.jsonl", "a/b/2.jsonl.gz", "3.parquet", "a/notes.txt", "4.jsonl.open",
             "logs/broker/b1.00000.log", "logs/broker/b1.00001.log.open",
             "zk/r.zk.jsonl")  # fmt: skip
    for name in names:
        (landing / name).parent.mkdir(parents=True, exist_ok=True)
        (landing / name).write_bytes(b"x")
    lakehouse = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "lh")))
    batches: list[list[str]] = []
    query = (
        input_files(lakehouse, str(landing), 2, "files")
        .writeStream.foreachBatch(
            lambda df, _: batches.append(sorted(r["path"] for r in df.collect()))
        )
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    handed = sorted(Path(p.removeprefix("file:")).relative_to(landing) for b in batches for p in b)
    assert [str(p) for p in handed] == [
        "3.parquet",
        "a/1.jsonl",
        "a/b/2.jsonl.gz",
        "logs/broker/b1.00000.log",
        "zk/r.zk.jsonl",
    ]
    assert sorted(len(b) for b in batches) == [1, 2, 2]
