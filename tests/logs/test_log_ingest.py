"""Log ingest: layouts, multi-line entries, parse errors, hosts, time zones, incremental runs."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest
from kept_blocks import kept_blocks
from pyspark.sql import functions as F

from ingest.log_format import ERR_LAYOUT, ERR_ORPHAN, parse_log_lines
from ingest.logs import host_from_filename, ingest_logs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def _rows(lakehouse, table: str) -> dict[int, dict]:
    return {r.line_number: r.asDict() for r in lakehouse.read(table).collect()}


def test_parse_of_no_lines_gives_no_entries(spark):
    empty = spark.createDataFrame([], "source_file string, line_number long, value string")
    assert parse_log_lines(empty).count() == 0


def test_host_from_filename():
    assert host_from_filename("/x/pulsar-broker-broker-1.log") == "broker-1"
    assert host_from_filename("/x/pulsar-bookie-bk1.log.2") == "bk1"
    assert host_from_filename("/x/client-unload.log.gz") == "client-unload"


def test_broker_log_entries_stack_trace_and_parse_errors(lakehouse, tmp_path):
    path = tmp_path / "broker-standalone.log"
    shutil.copy(FIXTURES / "broker-standalone.log", path)
    kept_before = kept_blocks(lakehouse.spark)
    report = ingest_logs(lakehouse, path, "broker")
    assert kept_blocks(lakehouse.spark) <= kept_before  # the batch's lines and offsets freed
    rows = _rows(lakehouse, "broker_log")

    assert (report.files, report.lines, report.entries, report.parse_errors) == (1, 53, 42, 2)
    assert rows[1]["parse_error"] == ERR_ORPHAN
    assert rows[1]["raw"] == '  "topicLevelPoliciesEnabled" : "true",'
    assert rows[1]["ts"] is None
    started = rows[2]
    assert started["ts"] == datetime(2026, 11, 22, 2, 13, 19, 548000)
    assert (started["level"], started["thread"], started["host"]) == (
        "INFO",
        "main",
        "broker-standalone",
    )
    assert started["logger"] == "org.apache.pulsar.broker.service.BrokerService"
    # the 12-line stack trace stays with the WARN entry above it, keyed by its first line
    trace = next(r for r in rows.values() if "Encountered unexpected exception" in r["raw"])
    assert trace["line_number"] == 39
    assert trace["raw"].count("\n") == 11
    assert trace["message"].startswith("Encountered unexpected exception from watcher")
    assert "RejectedExecutionException" in trace["message"]
    assert trace["parse_error"] is None
    assert rows[51]["raw"] == "2026-11-22T02:15:03,6"
    assert rows[51]["parse_error"] == ERR_LAYOUT

    again = ingest_logs(lakehouse, path, "broker")
    assert (again.files, again.skipped_files) == (0, 1)
    assert lakehouse.read("broker_log").count() == 42

    with path.open("a") as f:
        f.write("2026-11-22T02:16:00,000+0000 [main] INFO  x.Y - appended\n")
    changed = ingest_logs(lakehouse, path, "broker", host="b1")
    assert (changed.files, changed.lines) == (1, 54)
    hosts = lakehouse.read("broker_log").groupBy("host").count().collect()
    assert [(h.host, h["count"]) for h in hosts] == [("b1", 43)]
    manifest = lakehouse.read("ingested_files").filter(F.col("kind") == "log:broker")
    assert manifest.count() == 2


def test_bookkeeper_layout_without_offset_is_read_as_utc(lakehouse):
    report = ingest_logs(lakehouse, FIXTURES / "reference-forms-bookie.log", "bookie", host="bk2")
    rows = _rows(lakehouse, "bookie_log")
    assert (report.entries, report.parse_errors, report.timestamp_zone) == (3, 0, "UTC")
    first = rows[1]
    assert first["ts"] == datetime(2025, 3, 4, 10, 15, 31, 457000)
    assert first["thread"] == "BookieStateManagerService-0"
    assert (first["level"], first["logger"]) == ("INFO", "BookieStateManager")
    assert first["message"] == (
        "Transitioning Bookie to ReadOnly mode, and will serve only read requests from clients!"
    )
    assert rows[3]["logger"] == "ReplicationWorker"  # the file appender's variant (no "- ")


def test_cpp_client_layout_in_a_given_time_zone(lakehouse):
    ingest_logs(lakehouse, FIXTURES / "client-unload.log", "client", zone="Europe/Berlin")
    rows = _rows(lakehouse, "client_log")
    reconnect = rows[10]
    # 02:14:09.927 in Berlin (UTC+1 in November) is 01:14:09.927 UTC
    assert reconnect["ts"] == datetime(2026, 11, 22, 1, 14, 9, 927000)
    assert (reconnect["logger"], reconnect["thread"]) == ("HandlerBase", "140646827947712")
    assert reconnect["message"] == (
        "[persistent://public/default/t2, standalone-0-1] Schedule reconnection in 0.1 s"
    )
    assert all(r["parse_error"] is None for r in rows.values())


@pytest.mark.parametrize("source", ["zookeeper"])
def test_unknown_source_is_a_usage_error(lakehouse, source):
    from pulsar_audit.errors import UsageError

    with pytest.raises(UsageError, match="unknown log source 'zookeeper'"):
        ingest_logs(lakehouse, FIXTURES / "client-unload.log", source)
