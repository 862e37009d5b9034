"""Logs of each client and broker version (fixtures/logs/versions): layouts, recognized lines,
application output between the entries, consumers attributed to their topic."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingest.log_format import ERR_NOT_ENTRY, parse_log_lines, with_layout_fields
from ingest.logs import ingest_logs, with_lineage
from pipelines.consumer_attribution import with_consumer_topics
from pipelines.infra_events import build_infra_events, match_log_events
from serve.recognition import recognition_counts, recognized_by_source

VERSIONS = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "versions"
ORDERS = "persistent://public/default/orders"
AT = datetime(2026, 1, 1)

# file → (source, lines, entries, recognized, not_log_entries)
COUNTS = {
    "broker-2.10.log": ("broker", 23, 23, 22, 0),
    "broker-2.11.log": ("broker", 23, 23, 22, 0),
    "broker-3.0.log": ("broker", 23, 23, 22, 0),
    "broker-3.3.log": ("broker", 23, 23, 22, 0),
    "broker-3.0-consumer.log": ("broker", 4, 4, 3, 0),
    "proxy-2.10.log": ("broker", 4, 4, 3, 0),
    "client-cpp-2.2.log": ("client", 11, 11, 7, 0),
    "client-cpp-3.2-consumer.log": ("client", 18, 12, 7, 6),
    "client-java-2.10.log": ("client", 17, 12, 10, 2),
    "client-java-4.0-logback.log": ("client", 6, 6, 5, 0),
    "client-java-3.0-spring.log": ("client", 3, 3, 2, 0),
    "client-go-0.9.log": ("client", 10, 9, 7, 1),
    "client-go-0.15.log": ("client", 3, 3, 2, 0),
}


def layout_counts(lines: DataFrame, zone: str = "UTC") -> DataFrame:
    """Per file and layout, how many lines start an entry of that layout (layout null: none).

    Tells which layout each file was recognised in: a client file in the Java client's
    log4j2 layout, in the C++ client's, or in both.
    """
    return (
        lines.transform(with_layout_fields, zone)
        .groupBy("source_file", "layout")
        .agg(F.count(F.lit(1)).alias("lines"))
    )


def _lines(spark, *names: str):
    rows = [
        (name, number, text)
        for name in names
        for number, text in enumerate((VERSIONS / name).read_text().splitlines(), 1)
    ]
    return spark.createDataFrame(rows, "source_file string, line_number long, value string")


def _entries(spark, *names: str):
    source = COUNTS[names[0]][0]
    return (
        _lines(spark, *names)
        .transform(parse_log_lines)
        .transform(with_lineage, source, {n: "h" for n in names}, "test", AT)
    )


def _events(every_event: DataFrame, *names: str) -> dict[tuple[str, int], dict]:
    """The events of these files, consumers attributed among these files only."""
    events = every_event.filter(F.col("source_file").isin(*names)).transform(with_consumer_topics)
    return {(r.source_file, r.line_number): r.asDict() for r in events.collect()}


@pytest.fixture(scope="module")
def every_entry(spark) -> DataFrame:
    """Every version file parsed on its own (as `_entries` of one name does), in one frame.

    Built once for the module: the tests of single files read their file's rows from it.
    """
    parts = [_entries(spark, name) for name in sorted(COUNTS)]
    entries = parts[0]
    for part in parts[1:]:
        entries = entries.unionByName(part)
    return entries.localCheckpoint()


@pytest.fixture(scope="module")
def entry_rows(every_entry: DataFrame) -> dict[str, dict[int, object]]:
    """file → line number → its entry row."""
    rows: dict[str, dict[int, object]] = {}
    for row in every_entry.collect():
        rows.setdefault(row.source_file, {})[row.line_number] = row
    return rows


@pytest.fixture(scope="module")
def every_event(every_entry: DataFrame) -> DataFrame:
    """The pattern match of every entry (one row at a time, so of each file alone), once.

    Checkpointed to cut the lineage of the match (one CASE over every pattern): the
    attribution joins it with itself, as build_infra_events does with its cached events.
    """
    return match_log_events(every_entry).localCheckpoint()


def test_recognized_line_counts_per_version(every_entry):
    per_file = recognition_counts(every_entry, by="source_file").collect()
    got = {
        r.source_file: (COUNTS[r.source_file][0], r.lines, r.entries)
        + (r.recognized, r.not_log_entries)
        for r in per_file
    }
    assert got == COUNTS


def test_each_client_layout_is_detected(spark):
    names = [n for n in COUNTS if n.startswith("client-")]
    counts = layout_counts(_lines(spark, *names)).filter(F.col("layout").isNotNull()).collect()
    layouts = {r.source_file: r.layout for r in counts}
    assert layouts == {
        "client-cpp-2.2.log": "cpp2",
        "client-cpp-3.2-consumer.log": "cpp",
        "client-java-2.10.log": "log4j",
        "client-java-4.0-logback.log": "log4j",
        "client-java-3.0-spring.log": "spring",
        "client-go-0.9.log": "go",
        "client-go-0.15.log": "go",
    }


def test_layout_fields_of_the_new_layouts(entry_rows):
    rows = {
        (name, line): r
        for name in ("client-cpp-2.2.log", "client-java-3.0-spring.log", "client-go-0.9.log")
        for line, r in entry_rows[name].items()
    }
    cpp2 = rows[("client-cpp-2.2.log", 9)]
    assert (cpp2.ts, cpp2.level, cpp2.thread, cpp2.logger) == (
        datetime(2018, 10, 20, 23, 8, 10, 215000),
        "ERROR",
        None,
        "ClientConnection",
    )
    assert cpp2.message == "[127.0.0.1:53130 -> 127.0.0.1:6650] Read failed: End of file"
    spring = rows[("client-java-3.0-spring.log", 1)]
    assert (spring.ts, spring.thread, spring.logger) == (
        datetime(2023, 9, 1, 8, 0, 0, 120000),
        "pulsar-client-io-1-1",
        "o.a.p.client.impl.ProducerImpl",
    )
    go = rows[("client-go-0.9.log", 5)]
    go_at = datetime(2022, 11, 2, 9, 0, 20)
    assert (go.ts, go.level, go.logger) == (go_at, "WARN", "pulsar-client-go")
    assert go.message == (
        'Connection was closed cnx="127.0.0.1:53400 -> 127.0.0.1:6650" producerID=1 '
        'producer_name=standalone-0-11 topic="persistent://public/default/orders"'
    )


def test_application_output_is_kept_and_hides_no_entry(entry_rows):
    rows = entry_rows["client-cpp-3.2-consumer.log"]
    assert len(rows) == 18  # every line is a row of its own: no entry swallowed another
    printed = [n for n, r in rows.items() if r.parse_error == ERR_NOT_ENTRY]
    assert printed == [6, 7, 8, 9, 10, 13]
    assert rows[6].raw == "received b'msg-1' (1201,0,-1,-1)"
    assert rows[11].parse_error is None
    assert rows[11].message.endswith("Connection disconnected")
    assert rows[5].raw.count("\n") == 0


def test_stack_trace_lines_still_join_their_entry(entry_rows):
    rows = entry_rows["client-java-2.10.log"]
    trace = rows[11]
    assert trace.raw.count("\n") == 3
    assert "\tat io.netty.channel.nio.NioEventLoop.run" in trace.message
    assert rows[15].message.endswith("Disconnected")


def test_cpp_3_2_consumer_lines_are_attributed_through_the_broker(every_event):
    events = _events(every_event, "client-cpp-3.2-consumer.log", "broker-3.0-consumer.log")
    client = {
        line: (e["event_type"], e["topic"])
        for (name, line), e in events.items()
        if name == "client-cpp-3.2-consumer.log"
    }
    assert client == {
        5: ("client_consumer_created", ORDERS),
        11: ("client_connection_closed", None),
        12: ("client_reconnect_scheduled", ORDERS),
        15: ("client_consumer_created", ORDERS),
        16: ("client_consumer_disconnected", ORDERS),
        17: ("client_consumer_closing", ORDERS),
        18: ("client_consumer_closed", ORDERS),
    }
    reconnect = events[("client-cpp-3.2-consumer.log", 12)]
    assert reconnect["detail"] == (
        '{"consumer_ref":"0x55d1c2a8e0f0","subscription":"sub-a","consumer_id":"0","delay_s":"0.1"}'
    )
    notified = events[("client-cpp-3.2-consumer.log", 16)]
    assert notified["detail"] == '{"consumer_id":"0","subscription":"sub-a"}'


def test_without_the_broker_line_no_topic_is_guessed(every_event):
    events = _events(every_event, "client-cpp-3.2-consumer.log")
    topics = {e["topic"] for (name, _), e in events.items()}
    assert topics == {None}


def test_java_and_go_consumers_carry_subscription_and_topic(every_event):
    events = _events(every_event, "client-java-2.10.log", "client-go-0.9.log", "client-go-0.15.log")
    java = events[("client-java-2.10.log", 7)]
    assert (java["event_type"], java["topic"]) == ("client_consumer_disconnected", ORDERS)
    assert java["detail"] == (
        '{"connection":"localhost/127.0.0.1:6650","consumer_id":"0","subscription":"sub-a"}'
    )
    go = events[("client-go-0.15.log", 2)]
    assert (go["event_type"], go["topic"]) == ("client_reconnect_scheduled", ORDERS)
    assert go["detail"] == '{"consumer_id":"2","delay":"0s","subscription":"sub-g"}'
    go_producer = events[("client-go-0.9.log", 6)]
    assert go_producer["detail"] == '{"delay":"111.830097ms"}'


def test_cpp_consumer_log_end_to_end_on_delta(lakehouse):
    ingest_logs(lakehouse, VERSIONS / "client-cpp-3.2-consumer.log", "client")
    ingest_logs(lakehouse, VERSIONS / "broker-3.0-consumer.log", "broker")
    build_infra_events(lakehouse)
    reconnects = (
        lakehouse.read("infra_events")
        .filter(F.col("event_type") == "client_reconnect_scheduled")
        .collect()
    )
    assert [(r.topic, r.line_number) for r in reconnects] == [(ORDERS, 12)]
    by_source = {r["source"]: r for r in recognized_by_source(lakehouse)}
    assert (by_source["client"]["recognized"], by_source["client"]["entries"]) == (7, 12)
    assert by_source["client"]["not_log_entries"] == 6
