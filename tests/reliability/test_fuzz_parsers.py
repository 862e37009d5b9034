"""Fuzzing every parser: hostile trace lines, log lines and ZooKeeper payloads never crash
an ingest; every refused record is quarantined with a reason naming the field (and its file
and line); counts reconcile.

Hypothesis generates the inputs; the Spark parsers see them in one file per parser, through
the real ingest (one Spark pass for thousands of lines, not one per example); the pure Python
ZooKeeper decoder sees each example directly. Default: 2,000+ inputs per parser. Long
(PULSAR_AUDIT_RELIABILITY=long): PULSAR_AUDIT_FUZZ_INPUTS (default 100,000) per parser.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

import pytest
from fuzz_inputs import fixture_log_lines, log_line, trace_line, zk_line, zk_payload
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from reliability_lakehouse import is_long, record_figure

from capture.zk_decode import decode_znode
from ingest.logs import ingest_logs
from ingest.trace_format import parse_records
from ingest.zk_ingest import ingest_zk
from jobs.ingest import ingest_traces
from pipelines.infra_events import match_log_events
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.spark import GENERATED_CODE_CONF, session_settings

DEFAULT_INPUTS = 2_000
MEGABYTE = 1 << 20
# Every way the trace format or a row rule says why a record is refused: each names a field
# (or says the line is not a JSON object). A reason starts with one; more may follow ("; ").
TRACE_REASON = re.compile(
    r"^(invalid JSON: expected one JSON object per line"
    r"|missing required field '\w+'( on a \w+ event)?"
    r"|unknown role '.*' \(expected producer, consumer or run\)"
    r"|unknown event '.*' for role '\w+'"
    r"|unparseable ts '.*': expected RFC 3339 with an offset or epoch milliseconds"
    r"|field '\w+' must be .*"
    r"|field '.*' appears more than once: expected each field once"
    r"|\w+: \w+ )",
    re.DOTALL,
)


def inputs_per_parser() -> int:
    if is_long():
        return int(os.environ.get("PULSAR_AUDIT_FUZZ_INPUTS", "100000"))
    return DEFAULT_INPUTS


def generate(strategy: st.SearchStrategy, n: int) -> list:
    """`n` examples of `strategy`, drawn by Hypothesis (generation only: no shrinking)."""
    drawn: list = []

    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(example) -> None:
        drawn.append(example)

    collect()
    assert len(drawn) >= n, f"Hypothesis drew {len(drawn)} examples, {n} wanted"
    return drawn


@functools.cache
def hostile_trace_lines(n: int) -> list[bytes]:
    """`n` hostile trace lines, drawn once per process for the tests that read them."""
    return generate(trace_line(), n)


def write_lines(path: Path, lines: list[bytes], huge: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join([*lines, *huge]) + b"\n")
    return path


# long tier; in the default run: test_trace_parser_quarantines_every_hostile_line and
# tests/test_side_by_side.py (which inputs get generated code)
@pytest.mark.long
def test_the_trace_parse_with_generated_code_is_the_interpreted_parse(spark, tmp_path: Path):
    """A small input is parsed interpreted, a larger one with generated code
    (pulsar_audit.spark.for_input): both give every hostile line the same fields, extra and
    reason."""
    lines = generate(trace_line(), DEFAULT_INPUTS)
    trace = write_lines(tmp_path / "fuzz-trace.jsonl", lines, [])

    def parsed() -> DataFrame:
        text = spark.read.text(str(trace)).withColumn(
            "line_number", F.monotonically_increasing_id()
        )
        records = parse_records(text, ("line_number",)).withColumn("extra", F.to_json("extra"))
        return records.localCheckpoint()  # computed here, under the session's settings

    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"  # the tests' session
    interpreted = parsed()
    with session_settings(spark, GENERATED_CODE_CONF):
        generated = parsed()
    assert interpreted.count() == generated.count() >= len(lines)  # some hold line breaks
    assert interpreted.filter(F.col("reason").isNotNull()).count() > 0
    assert interpreted.exceptAll(generated).count() == 0
    assert generated.exceptAll(interpreted).count() == 0


# long tier, and the long reliability run's (scripts/reliability.py, on its own number of
# lines); in the default run: tests/ingest/test_trace_typed_parse.py (about 90 edge lines both
# ways) and test_trace_parser_quarantines_every_hostile_line (the generated lines, one way)
@(pytest.mark.reliability_long if is_long() else pytest.mark.long)
def test_the_typed_parse_is_the_text_parse_on_hostile_lines(spark, tmp_path: Path):
    """The typed parse (what a large input gets first) gives every hostile line the fields,
    extra and reason the text parse gives (ingest/trace_format.py parse_records)."""
    lines = hostile_trace_lines(inputs_per_parser())
    trace = write_lines(tmp_path / "fuzz-trace.jsonl", lines, [])
    text = spark.read.text(str(trace)).withColumn("line_number", F.monotonically_increasing_id())

    def parsed(typed_first: bool) -> DataFrame:
        records = parse_records(text, ("line_number",), typed_first)
        return records.withColumn("extra", F.to_json("extra")).localCheckpoint()

    typed, as_text = parsed(True), parsed(False)
    assert typed.count() == as_text.count() >= len(lines)
    assert as_text.filter(F.col("reason").isNull() & ~F.col("_blank")).count() > 0
    assert as_text.filter(F.col("reason").isNotNull()).count() > 0
    assert typed.exceptAll(as_text).count() == 0
    assert as_text.exceptAll(typed).count() == 0


def test_trace_parser_quarantines_every_hostile_line(lakehouse: Lakehouse, tmp_path: Path):
    n = inputs_per_parser()
    lines = hostile_trace_lines(n)
    huge = [
        json.dumps(
            {
                "run_id": "run-z",
                "topic": "t",
                "role": "producer",
                "client": "p1",
                "event": "send",
                "ts": 1,
                "seq": 1,
                "note": "x" * MEGABYTE,
            }  # fmt: skip
        ).encode(),
        b"{" + b"\xff" * MEGABYTE,
    ]
    trace = write_lines(tmp_path / "fuzz" / "fuzz-trace.jsonl", lines, huge)
    report = ingest_traces(lakehouse, trace)
    assert report.files == 1
    assert report.records == report.accepted + report.quarantined
    assert report.records >= len(lines) * 0.9  # blank lines are not records
    quarantine = lakehouse.read("quarantine").filter(F.col("source_file") == str(trace))
    assert quarantine.count() == report.quarantined
    nameless = quarantine.filter(
        F.col("reason").isNull() | (F.col("reason") == "") | F.col("line_number").isNull()
    )
    assert nameless.count() == 0
    reasons = [r["reason"] for r in quarantine.select("reason").distinct().collect()]
    unexplained = [r for r in reasons if not TRACE_REASON.match(r)]
    assert not unexplained, unexplained[:5]
    [manifest] = lakehouse.read("ingested_files").collect()
    assert manifest["records"] == manifest["accepted"] + manifest["quarantined"]
    record_figure(
        "fuzz:trace lines",
        {
            "tried": len(lines) + len(huge),
            "distinct": len(set(lines)),
            "crashes": 0,
            "records": report.records,
            "quarantined": report.quarantined,
        },  # fmt: skip
    )


def test_log_parsers_keep_every_hostile_line(lakehouse: Lakehouse, tmp_path: Path):
    n = inputs_per_parser()
    lines = generate(log_line(fixture_log_lines()), n)
    huge = [b"2025-03-04T10:15:30,123+0000 [main] INFO  a.B - " + b"y" * MEGABYTE, b"\x00" * 4096]
    path = write_lines(tmp_path / "fuzz" / "pulsar-broker-fuzz.log", lines, huge)
    report = ingest_logs(lakehouse, path, "broker")
    table = lakehouse.read("broker_log")
    # an entry's raw text is its lines joined by newlines (a line read holds none)
    lines_held = F.sum(F.size(F.split("raw", "\n")))
    held = table.agg(lines_held.alias("lines"), F.count(F.lit(1)).alias("rows")).first()
    assert held["lines"] == report.lines  # every line read is held by exactly one row
    assert held["rows"] == report.entries
    errors = table.filter(F.col("parse_error").isNotNull())
    assert errors.filter((F.col("parse_error") == "") | F.col("line_number").isNull()).count() == 0
    assert report.parse_errors == errors.count()
    # the infrastructure patterns run over whatever the layouts made of it
    events = match_log_events(table).count()
    record_figure(
        "fuzz:log lines",
        {
            "tried": len(lines) + len(huge),
            "distinct": len(set(lines)),
            "crashes": 0,
            "lines": report.lines,
            "entries": report.entries,
            "parse_errors": report.parse_errors,
            "events_matched": events,
        },  # fmt: skip
    )


def test_zookeeper_capture_lines_are_quarantined_with_a_reason(
    lakehouse: Lakehouse, tmp_path: Path
):
    n = inputs_per_parser()
    lines = generate(zk_line(), n)
    path = write_lines(tmp_path / "fuzz" / "fuzz.zk.jsonl", lines, [b'{"path":"' + b"z" * MEGABYTE])
    report = ingest_zk(lakehouse, path)
    assert report.records == report.accepted + report.quarantined
    quarantine = lakehouse.read("quarantine").filter(F.col("source_file") == str(path))
    assert quarantine.count() == report.quarantined
    assert quarantine.filter(F.col("reason").isNull() | (F.col("reason") == "")).count() == 0
    assert lakehouse.read("zk_changes").count() == report.accepted
    record_figure(
        "fuzz:ZooKeeper capture lines",
        {
            "tried": len(lines) + 1,
            "distinct": len(set(lines)),
            "crashes": 0,
            "records": report.records,
            "quarantined": report.quarantined,
        },  # fmt: skip
    )


def test_zookeeper_payload_decoding_never_raises():
    """decode_znode turns any bytes into (text or base64, JSON or an 'undecoded' reason)."""
    n = inputs_per_parser()
    tried = []

    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(zk_payload())
    def decodes(payload: tuple[str, bytes]) -> None:
        path, data = payload
        tried.append(payload)
        raw, decoded = decode_znode(path, data)
        if not data:
            assert (raw, decoded) == (None, None)
            return
        assert isinstance(raw, str)
        parsed = json.loads(decoded)
        if isinstance(parsed, dict) and "undecoded" in parsed:
            assert re.match(r"^\w+(Error|Exception)?: ", parsed["undecoded"]), parsed

    decodes()
    assert len(tried) >= n
    decoded = [json.loads(decode_znode(path, data)[1]) for path, data in tried if data]
    undecoded = sum(1 for d in decoded if isinstance(d, dict) and "undecoded" in d)
    record_figure(
        "fuzz:ZooKeeper payloads",
        {"tried": len(tried), "distinct": len(set(tried)), "crashes": 0, "undecoded": undecoded},
    )


@pytest.mark.parametrize("strategy", ["trace", "log", "zk"])
def test_generators_make_the_hostile_cases(strategy: str):
    """The generators do produce what the suite claims to try (cheap: no Spark)."""
    if strategy == "trace":
        sample = generate(trace_line(), 400)
        assert any(b"NaN" in x or b"Infinity" in x for x in sample)
        assert any(x.startswith(b"[[[[[[[[[[") for x in sample)
        assert any(x.count(b'"seq"') >= 2 or x.count(b'"ts"') >= 2 for x in sample)
    elif strategy == "log":
        sample = generate(log_line(fixture_log_lines()), 400)
        assert any(x.startswith(b"\tat ") for x in sample)
        assert any(x.endswith(b"\r") for x in sample)
    else:
        payloads = generate(zk_payload(), 400)
        assert any(d.startswith(b"BookieMetadataFormatVersion") for _, d in payloads)
        sample = [d for _, d in payloads]
    assert any(_not_utf8(x) for x in sample)


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
