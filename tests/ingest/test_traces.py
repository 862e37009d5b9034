"""Trace ingest: exact accepted / quarantined counts and reasons, incremental re-ingest."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from trace_lines import parse_lines, read_numbered_lines

from checks.run_checks import EVENT_TABLES
from checks.tables import TABLE_METRICS
from jobs.ingest import check_stale_runs, ingest_traces

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"

# line → (target table, check, reason) for every refused record of the fixture folder.
EXPECTED_QUARANTINE = {
    ("run-a.jsonl", 7): (
        "producer_events",
        "trace_format",
        "unparseable ts 'not a time': expected RFC 3339 with an offset or epoch milliseconds",
    ),
    ("run-a.jsonl", 8): (
        "producer_events",
        "trace_format",
        "field 'seq' must be an integer >= 0, got -4",
    ),
    ("run-a.jsonl", 9): (
        "producer_events",
        "ack_has_ledger_id,ack_has_entry_id",
        "ack_has_ledger_id: an ack must carry the MessageId's ledger_id; "
        "ack_has_entry_id: an ack must carry the MessageId's entry_id",
    ),
    ("run-a.jsonl", 10): ("producer_events", "trace_format", "missing required field 'client'"),
    ("run-a.jsonl", 11): (
        "trace",
        "trace_format",
        "unknown role 'observer' (expected producer, consumer or run)",
    ),
    ("run-a.jsonl", 12): (
        "producer_events",
        "trace_format",
        "unknown event 'receive' for role 'producer'",
    ),
    ("run-a.jsonl", 13): (
        "producer_events",
        "trace_format",
        "field 'seq' must be an integer >= 0, got eight",
    ),
    ("run-a.jsonl", 14): (
        "producer_events",
        "trace_format",
        "missing required field 'seq' on a send event",
    ),
    ("run-a.jsonl", 15): (
        "producer_events",
        "trace_format",
        "unparseable ts '2025-03-04T10:15:30': expected RFC 3339 with an offset "
        "or epoch milliseconds",
    ),
    ("run-a.jsonl", 16): (
        "trace",
        "trace_format",
        "invalid JSON: expected one JSON object per line",
    ),
    ("run-a.jsonl", 17): (
        "trace",
        "trace_format",
        "invalid JSON: expected one JSON object per line",
    ),
    ("run-a-consumer.jsonl.gz", 3): (
        "consumer_events",
        "receive_has_ledger_id,receive_has_entry_id",
        "receive_has_ledger_id: a receive must carry the MessageId's ledger_id; "
        "receive_has_entry_id: a receive must carry the MessageId's entry_id",
    ),
    ("run-a-consumer.jsonl.gz", 6): (
        "run_events",
        "ensemble_at_least_write_quorum",
        "ensemble_at_least_write_quorum: E must be >= Qw",
    ),
}


def _lines(spark, rows: list[str], tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(r + "\n" for r in rows))
    return parse_lines(read_numbered_lines(spark, [str(path)]))


def test_parse_empty_file_gives_no_records(spark, tmp_path: Path):
    assert _lines(spark, [], tmp_path).count() == 0
    assert _lines(spark, ["", "   "], tmp_path).count() == 0


def test_parse_both_ts_styles_to_the_same_instant(spark, tmp_path: Path):
    base = {
        "run_id": "r",
        "topic": "t",
        "role": "producer",
        "client": "p",
        "event": "send",
        "seq": 1,
    }
    styles = [
        "2025-03-04T10:15:30.123Z",
        "2025-03-04T11:15:30.123+01:00",
        1741083330123,
        1741083330123.0,
        "1741083330123",
    ]
    rows = [json.dumps({**base, "ts": ts}) for ts in styles]
    got = _lines(spark, rows, tmp_path).select("reason", F.unix_micros("ts").alias("us")).collect()
    assert [(r.reason, r.us) for r in got] == [(None, 1741083330123000)] * len(styles)


def test_parse_keeps_unknown_fields_in_extra(spark, tmp_path: Path):
    row = {
        "run_id": "r",
        "topic": "t",
        "role": "producer",
        "client": "p",
        "event": "send",
        "seq": 1,
        "ts": 0,
        "host": "h1",
        "nested": {"a": [1, 2]},
        "subscription": "kept-for-producer",
    }
    got = _lines(spark, [json.dumps(row)], tmp_path).first()
    assert got.reason is None
    assert got.extra == {"host": "h1", "nested": '{"a":[1,2]}', "subscription": "kept-for-producer"}


def test_parse_reports_every_reason_of_a_record(spark, tmp_path: Path):
    row = {
        "run_id": "r",
        "topic": "t",
        "role": "consumer",
        "event": "receive",
        "ts": "soon",
        "seq": 1.5,
        "redelivery_count": "x",
    }
    got = _lines(spark, [json.dumps(row)], tmp_path).first().reason
    assert got == (
        "missing required field 'client'; "
        "unparseable ts 'soon': expected RFC 3339 with an offset or epoch milliseconds; "
        "field 'seq' must be an integer >= 0, got 1.5; "
        "field 'redelivery_count' must be an integer, got x"
    )


def test_parse_v1_1_subscription_type_and_keys(spark, tmp_path: Path):
    """Trace format v1.1: subscription_type on consumer events (one of Pulsar's four types,
    else refused with a reason), key and ordering_key on both sides."""
    base = {"run_id": "r", "topic": "t", "ts": 0, "seq": 1, "ledger_id": 3, "entry_id": 4}
    receive = {**base, "role": "consumer", "client": "c", "event": "receive", "subscription": "s"}
    rows = [
        {**receive, "subscription_type": "Key_Shared", "key": "k1", "ordering_key": "o1"},
        {**receive, "subscription_type": "key_shared"},
        {**base, "role": "producer", "client": "p", "event": "ack", "key": "k1"},
    ]
    got = _lines(spark, [json.dumps(r) for r in rows], tmp_path).collect()
    fields = [(r.subscription_type, r.key, r.ordering_key, r.reason, r.extra) for r in got]
    assert fields == [
        ("Key_Shared", "k1", "o1", None, {}),
        (
            "key_shared",
            None,
            None,
            "unknown subscription_type 'key_shared' (expected Exclusive, Failover, Shared, "
            "Key_Shared)",
            {},
        ),
        (None, "k1", None, None, {}),
    ]


@pytest.mark.slow
def test_ingest_counts_reasons_and_reingest(lakehouse, tmp_path: Path):
    folder = tmp_path / "traces"
    shutil.copytree(FIXTURES, folder)
    report = ingest_traces(lakehouse, folder)
    assert (report.files, report.records, report.accepted, report.quarantined) == (2, 22, 9, 13)
    assert report.runs == ["run-a"]
    quarantine = {
        (Path(r.source_file).name, r.line_number): (r.target_table, r.check, r.reason)
        for r in lakehouse.read("quarantine").collect()
    }
    assert quarantine == EXPECTED_QUARANTINE
    accepted = {
        t: lakehouse.read(t).count() for t in ("producer_events", "consumer_events", "run_events")
    }
    assert accepted == {"producer_events": 4, "consumer_events": 3, "run_events": 2}
    send = lakehouse.read("producer_events").filter(F.col("line_number") == 3).first()
    assert (send.seq, send.extra, send.partition) == (1, {"host": "bench-7"}, -1)
    receive = lakehouse.read("consumer_events").filter(F.col("seq") == 0).first()
    assert receive.extra == {"note": '{"k":[1,2]}'} and receive.redelivery_count == 0

    versions = {t: lakehouse.version(t) for t in ("producer_events", "quarantine", "check_results")}
    again = ingest_traces(lakehouse, folder)
    assert (again.files, again.skipped_files, again.records) == (0, 2, 0)
    assert {t: lakehouse.version(t) for t in versions} == versions

    # A changed file replaces its own rows; the other file is skipped.
    with gzip.open(folder / "run-a-consumer.jsonl.gz", "wt") as out:
        out.write(
            json.dumps(
                {
                    "run_id": "run-a",
                    "topic": "persistent://public/default/orders",
                    "role": "consumer",
                    "client": "reader-1",
                    "event": "end",
                    "ts": 5,
                }
            )
            + "\n"
        )
    changed = ingest_traces(lakehouse, folder)
    assert (changed.files, changed.skipped_files, changed.records, changed.accepted) == (1, 1, 1, 1)
    assert lakehouse.read("consumer_events").count() == 1
    assert lakehouse.read("run_events").count() == 1
    assert lakehouse.read("quarantine").count() == 11


@pytest.mark.slow
def test_table_checks_left_to_later_are_judged_once_the_run_is_checked(lakehouse, tmp_path: Path):
    """A watch's micro-batch ingests without the table checks; its reconciliation judges the
    run then, once: a run whose checks are current is not checked again."""
    folder = tmp_path / "traces"
    shutil.copytree(FIXTURES, folder)

    def table_checks() -> list[tuple[str, str, str]]:
        rows = lakehouse.read("check_results").filter(F.col("level") == "table").collect()
        return sorted((r.run_id, r.table, r.expectation) for r in rows)

    every_check = sorted(
        [("run-a", table, metric) for metric, (table, *_) in TABLE_METRICS.items()]
        + [("run-a", table, "schema") for table in EVENT_TABLES]
    )

    report = ingest_traces(lakehouse, folder, table_checks=False)
    assert (report.records, report.accepted, report.runs) == (22, 9, ["run-a"])
    assert table_checks() == []

    assert check_stale_runs(lakehouse, ["run-a", "run-never-ingested"]) == ["run-a"]
    assert table_checks() == every_check
    version = lakehouse.version("check_results")
    assert check_stale_runs(lakehouse, ["run-a"]) == []
    assert lakehouse.version("check_results") == version


def test_batches_keep_whole_files_and_empty_ones():
    from ingest.files import InputFile, batches

    files = [InputFile(f"f{i}", size, "h") for i, size in enumerate([0, 5, 0, 7, 3])]
    assert batches([]) == []
    got = [[f.path for f in group] for group in batches(files, batch_bytes=8)]
    assert got == [["f0", "f1", "f2"], ["f3"], ["f4"]]
