"""The typed parse of a trace line gives exactly what the text parse gives, for any line
(ingest/trace_format.py `parse_records`: a record the typed parse cannot vouch for goes
through the text parse)."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from ingest.trace_format import parse_records, read_typed

SEND = {"run_id": "r", "topic": "t", "role": "producer", "client": "p", "event": "send"}
RECEIVE = {
    "run_id": "r",
    "topic": "t",
    "role": "consumer",
    "client": "c",
    "event": "receive",
    "ts": 1741083330123,
    "seq": 3,
}


def _send(**fields: object) -> str:
    return json.dumps({**SEND, "ts": 1741083330123, "seq": 1, **fields})


HEAD = '{"run_id":"r","topic":"t","role":"producer","client":"p","event":"send","ts":1,'
REPEATED = HEAD + '"seq":1,"seq":2}'
TRAILING = HEAD + '"seq":1} x'

# Lines the typed parse could read differently from the text rules, and ordinary ones.
LINES = [
    _send(),
    json.dumps({**RECEIVE, "partition": 2, "ledger_id": 10, "entry_id": 4, "batch_index": 0}),
    json.dumps(
        {
            **RECEIVE,
            "subscription": "s",
            "subscription_type": "Key_Shared",
            "key": "k",
            "ordering_key": "o",
            "redelivery_count": 2,
            "producer": "p",
            "event_index": 7,
        }
    ),
    json.dumps({**RECEIVE, "subscription_type": "Fanout"}),
    json.dumps(
        {
            "run_id": "r",
            "topic": "t",
            "role": "run",
            "client": "h",
            "event": "config",
            "ts": 0,
            "ensemble_size": 3,
            "write_quorum": 2,
            "ack_quorum": 2,
            "deduplication": True,
            "scenario": "x",
        }
    ),
    *[
        _send(seq=seq)
        for seq in [
            "5",
            " 5",
            "05",
            "5.0",
            5.0,
            1e3,
            -5,
            "",
            None,
            [1],
            {"a": 1},
            999999999999999999,
            1000000000000000000,
            99999999999999999999,
            -9223372036854775808,
        ]
    ],
    *[
        _send(partition=p)
        for p in [-1, 999999999, 1000000000, 2147483647, 2147483648, -2147483648, "1", 1.0, True]
    ],
    *[_send(batch_index=b, ledger_id=1, entry_id=1, event="ack") for b in [0, 1.5, "x"]],
    *[
        json.dumps({**SEND, "role": "run", "event": "config", "ts": 0, "deduplication": d})
        for d in [True, False, "true", "TRUE", 1, "yes", None]
    ],
    *[
        _send(ts=ts)
        for ts in [
            0,
            1741083330123.0,
            1741083330101.5678,
            4721882400002.097,
            "4721882400002.097",
            1.741083330123e12,
            "1,234",
            " 123",
            -5,
            1e99,
            "2025-03-04T10:15:30.123Z",
            "2025-03-04t10:15:30+01:00",
            "2025-03-04T10:15:30",
            "soon",
            None,
            True,
        ]
    ],
    _send(client={"a": [1, 2]}),
    _send(client=5),
    _send(client=None),
    _send(client="\u00e9\u6f22"),
    _send(host="h1"),
    _send(subscription="for-consumers-only"),
    _send(Seq=2),
    json.dumps({**RECEIVE, "event": "subscribe", "Partition": 1}),
    _send(redelivery_count=2),
    _send(host=None),
    HEAD + '"seq":1,"seq":null}',
    HEAD + '"seq":-0}',
    HEAD + '"seq":1,"client":"a\tb"}',
    _send(**{"": 1}),
    REPEATED,
    HEAD + '"seq":1,"client":"q"}',
    TRAILING,
    HEAD + '"seq":01}',
    HEAD + '"seq":+1}',
    HEAD.replace('"ts":1', '"ts":NaN') + '"seq":1}',
    HEAD + '"seq":1',
    _send(role="observer"),
    _send(event="receive"),
    json.dumps({**SEND, "ts": 1}),
    json.dumps({**SEND, "event": "ack", "ts": 1, "seq": 1}),
    json.dumps({**SEND, "event": "nack", "ts": 1}),
    json.dumps({"run_id": "r"}),
    "{}",
    "[1, 2]",
    "[" + _send() + "]",
    "5",
    '"text"',
    "null",
    "not json",
    "",
    "   ",
]


def test_the_typed_parse_agrees_with_the_text_parse_on_every_line(spark):
    lines = spark.createDataFrame(
        [(n, line) for n, line in enumerate(LINES, start=1)], "line_number long, value string"
    ).withColumn("source_file", F.lit("f"))
    typed_frame, text_frame = parse_records(lines), parse_records(lines, typed_first=False)
    assert typed_frame.schema == text_frame.schema
    typed = typed_frame.orderBy("line_number").collect()
    text = text_frame.orderBy("line_number").collect()
    assert [r.asDict() for r in typed] == [r.asDict() for r in text]
    accepted = [r.line_number for r in typed if r.reason is None and not r._blank]
    # the ordinary records, and those whose text the rules accept, are accepted either way
    assert len(accepted) > 20
    reasons = {LINES[r.line_number - 1]: r.reason for r in typed}
    assert reasons[REPEATED] == "field 'seq' appears more than once: expected each field once"
    assert reasons[TRAILING] is None  # the object is read; what follows it is not (as before)


def test_the_typed_read_is_the_answer_for_ordinary_records_only(spark):
    """The typed read vouches for the records it reads whole (else the text parse would do
    all the work, at its cost) and for none of those the rules refuse or that carry more."""
    ordinary = [
        _send(),
        json.dumps({**RECEIVE, "partition": 2, "ledger_id": 10, "entry_id": 4, "batch_index": 0}),
        json.dumps({**SEND, "ts": "2025-03-04T10:15:30.123Z", "seq": 0, "key": "k"}),
    ]
    other = [
        REPEATED,
        HEAD + '"seq":1,"host":null}',
        _send(host="h1"),
        _send(redelivery_count=2),
        _send(seq=-1),
        _send(seq="5"),
        _send(ts="soon"),
        _send(partition=1000000000),
        json.dumps({**SEND, "ts": 1}),
        "not json",
    ]
    lines = spark.createDataFrame(
        [(n, line) for n, line in enumerate([*ordinary, *other])], "line_number long, value string"
    )
    clean = read_typed(lines, ("line_number",)).orderBy("line_number").collect()
    assert [r._clean for r in clean] == [True] * len(ordinary) + [False] * len(other)
