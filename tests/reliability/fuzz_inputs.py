"""Hypothesis strategies for hostile inputs: trace lines, log lines, ZooKeeper payloads.

Each strategy starts from what the parser is meant to read (a well-formed record, a real log
line of every layout from tests/fixtures/logs, protobuf metadata as BookKeeper and Pulsar
write it) and breaks it: truncated, wrong types, huge numbers, NaN, deep nesting, duplicate
keys, non-UTF-8 bytes, CR/CRLF, binary garbage. Lines are bytes: what a file holds.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import strategies as st

from capture.zk_proto import bookkeeper_metadata_pb2 as bk
from capture.zk_proto import managed_ledger_pb2 as ml

FIXTURE_LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
LEDGER_HEADER = b"BookieMetadataFormatVersion\t"

# --------------------------------------------------------------------------- shared pieces
junk_bytes = st.binary(min_size=1, max_size=40)
# Bytes that are not valid UTF-8 on their own (a lone continuation byte, an overlong form, …).
bad_utf8 = st.sampled_from([b"\x80", b"\xc0\xaf", b"\xff\xfe", b"\xed\xa0\x80", b"\xf8\x88"])
weird_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    weird_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(weird_text, inner, max_size=3)
    ),
    max_leaves=6,
)
# Number texts JSON allows and some it does not (Jackson accepts NaN and Infinity).
number_texts = st.sampled_from(
    [
        "NaN",
        "-Infinity",
        "Infinity",
        "1e400",
        "-0",
        "0.0",
        "9" * 40,
        "-" + "9" * 19,
        "1.7410833301015E12",
        "1e-400",
        "0x10",
        "01",
        "1_000",
    ]
)


def _mutate_text(text: bytes, draw) -> bytes:
    """One of: cut, insert bytes, CRLF end, CR inside, bad UTF-8, or as is."""
    how = draw(st.integers(min_value=0, max_value=6))
    if how == 0 and text:
        return text[: draw(st.integers(min_value=0, max_value=len(text) - 1))]
    if how == 1:
        at = draw(st.integers(min_value=0, max_value=len(text)))
        return text[:at] + draw(st.one_of(junk_bytes, bad_utf8)) + text[at:]
    if how == 2:
        return text + b"\r"
    if how == 3:
        at = draw(st.integers(min_value=0, max_value=len(text)))
        return text[:at] + b"\r" + text[at:]
    if how == 4:
        return draw(bad_utf8) + text
    return text


# --------------------------------------------------------------------------- trace lines
TRACE_FIELDS = {
    "producer": ("send", "ack", "nack"),
    "consumer": ("receive", "end"),
    "run": ("config", "chaos"),
}
OPTIONAL_NAMES = (
    "partition",
    "event_index",
    "seq",
    "ledger_id",
    "entry_id",
    "batch_index",
    "error",
    "subscription",
    "producer",
    "redelivery_count",
    "ensemble_size",
    "deduplication",
    "scenario",
)


@st.composite
def trace_record(draw) -> dict:
    """A trace record that is well formed, or close to it, or not at all."""
    role = draw(st.sampled_from([*TRACE_FIELDS, "broker", ""]))
    events = TRACE_FIELDS.get(role, ("send", "fly"))
    record = {
        "run_id": draw(st.sampled_from(["run-z", "", "r\u00e9", "run z"])),
        "topic": "persistent://public/default/fuzz",
        "role": role,
        "client": draw(st.sampled_from(["p1", "reader-1", ""])),
        "event": draw(st.sampled_from([*events, "ACK"])),
        "ts": draw(
            st.one_of(
                st.integers(min_value=0, max_value=2**53),
                st.sampled_from(["2025-03-04T10:00:00Z", "2025-13-40T99:00:00Z", "yesterday"]),
                st.floats(allow_nan=True),
                json_values,
            )
        ),
    }
    for name in draw(st.lists(st.sampled_from(OPTIONAL_NAMES), max_size=4, unique=True)):
        record[name] = draw(st.one_of(st.integers(-5, 2**63 + 5), json_values))
    for name in draw(st.lists(st.sampled_from(list(record)), max_size=2, unique=True)):
        if draw(st.booleans()):
            del record[name]
    return record


def _dumps_with_numbers(record: dict, draw) -> str:
    """JSON text where one value may be replaced by a bare number text (NaN, 1e400, 0x10…)."""
    text = json.dumps(record, ensure_ascii=draw(st.booleans()), allow_nan=True)
    if record and draw(st.booleans()):
        name = draw(st.sampled_from(sorted(record)))
        old = json.dumps({name: record[name]}, allow_nan=True)[1:-1]
        text = text.replace(old, f'"{name}": {draw(number_texts)}', 1)
    return text


@st.composite
def trace_line(draw) -> bytes:
    """One line of a trace file: mostly near-valid records, then every way of breaking one."""
    record = draw(trace_record())
    kind = draw(st.integers(min_value=0, max_value=9))
    text = _dumps_with_numbers(record, draw)
    if kind == 0:  # duplicate keys: the same field twice with different values
        name = draw(st.sampled_from(["seq", "ts", "role", "event", "run_id"]))
        text = text[:-1] + (", " if record else "") + f'"{name}": 1, "{name}": "two"' + "}"
    elif kind == 1:  # deep nesting inside a field, or as the whole line
        depth = draw(st.integers(min_value=10, max_value=3000))
        nested = "[" * depth + "]" * depth
        text = text[:-1] + f', "extra_deep": {nested}' + "}" if draw(st.booleans()) else nested
    elif kind == 2:  # not an object
        text = draw(st.one_of(st.just("[]"), st.just("null"), st.just('"x"'), st.just("42")))
    elif kind == 3:
        text = draw(weird_text)
    raw = text.encode("utf-8", "surrogatepass")
    if kind >= 7:
        raw = _mutate_text(raw, draw)
    return raw


# --------------------------------------------------------------------------- log lines
def fixture_log_lines() -> list[bytes]:
    """Every distinct line of the committed log fixtures (all layouts, real and reference)."""
    lines: set[bytes] = set()
    for path in sorted(FIXTURE_LOGS.rglob("*.log")):
        lines.update(line for line in path.read_bytes().splitlines() if line)
    return sorted(lines)


@st.composite
def log_line(draw, real: list[bytes]) -> bytes:
    """A real log line of some layout, broken or not; or a stray stack frame; or garbage."""
    kind = draw(st.integers(min_value=0, max_value=9))
    line = draw(st.sampled_from(real))
    if kind == 0:  # a broken timestamp: digits replaced in the first 25 bytes
        at = draw(st.integers(min_value=0, max_value=min(24, len(line) - 1)))
        line = line[:at] + draw(st.sampled_from([b"X", b"99", b"", b"-", b"\x00"])) + line[at + 1 :]
    elif kind == 1:  # stack traces without a head
        line = draw(
            st.sampled_from(
                [
                    b"\tat org.apache.pulsar.broker.Foo.bar(Foo.java:12)",
                    b"Caused by: java.io.IOException: broken pipe",
                    b"\t... 12 more",
                    b"java.lang.IllegalStateException",
                    b'"pulsar-io-4-1" #27 prio=5',
                ]
            )
        )
    elif kind == 2:
        line = draw(junk_bytes)
    elif kind in (3, 4, 5):
        line = _mutate_text(line, draw)
    return line


# --------------------------------------------------------------------------- ZooKeeper payloads
def _ledger_bytes(version: int, meta: bk.LedgerMetadataFormat) -> bytes:
    body = meta.SerializeToString()
    if version >= 3:
        body = _varint(len(body)) + body
    return LEDGER_HEADER + str(version).encode() + b"\n" + body


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


@st.composite
def ledger_metadata(draw) -> bk.LedgerMetadataFormat:
    meta = bk.LedgerMetadataFormat(
        quorumSize=draw(st.integers(0, 5)),
        ensembleSize=draw(st.integers(0, 5)),
        length=draw(st.integers(0, 2**40)),
        lastEntryId=draw(st.integers(-1, 2**40)),
    )
    for first in draw(st.lists(st.integers(0, 1000), max_size=3)):
        meta.segment.add(ensembleMember=["a:3181", "b:3181"], firstEntryId=first)
    return meta


ZK_PATHS = (
    "/ledgers/00/0000/L0012",
    "/ledgers/available/127.0.0.1:3181",
    "/managed-ledgers/public/default/persistent/orders",
    "/managed-ledgers/public/default/persistent/orders/reader-1",
    "/namespace/public/default/0x00000000_0x40000000",
    "/admin/policies/public/default",
    "/loadbalance/brokers/127.0.0.1:8080",
)


@st.composite
def zk_payload(draw) -> tuple[str, bytes]:
    """(path, data): ledger metadata of any header version, truncated or not; managed-ledger
    and cursor protobufs; JSON; or bytes of nothing."""
    path = draw(st.sampled_from(ZK_PATHS))
    kind = draw(st.integers(min_value=0, max_value=5))
    if kind == 0:
        data = _ledger_bytes(draw(st.integers(-2, 9)), draw(ledger_metadata()))
    elif kind == 1:
        info = ml.ManagedLedgerInfo()
        for ledger in draw(st.lists(st.integers(0, 2**40), max_size=3)):
            info.ledgerInfo.add(ledgerId=ledger, entries=draw(st.integers(0, 100)))
        data = info.SerializeToString()
    elif kind == 2:
        data = json.dumps(draw(json_values)).encode()
    elif kind == 3:
        data = LEDGER_HEADER + draw(st.binary(max_size=60))
    else:
        data = draw(st.binary(max_size=80))
    if draw(st.booleans()) and data:  # truncated anywhere
        data = data[: draw(st.integers(min_value=0, max_value=len(data) - 1))]
    return path, data


@st.composite
def zk_line(draw) -> bytes:
    """One line of a ZooKeeper capture file: a capture row, often broken."""
    row = {
        "ts": draw(st.sampled_from(["2026-11-22T02:42:50.000Z", "2026-11-22 02:42", "soon", None])),
        "zookeeper": draw(st.sampled_from(["127.0.0.1:2181", None])),
        "path": draw(st.one_of(st.sampled_from(ZK_PATHS), st.none(), weird_text)),
        "op": draw(st.sampled_from(["snapshot", "create", "change", "delete", "resync", "poke"])),
        "version": draw(st.one_of(st.integers(-(2**40), 2**40), weird_text, st.none())),
        "ephemeral_owner": draw(st.one_of(st.integers(-(2**70), 2**70), st.none())),
        "data": draw(st.one_of(weird_text, st.none())),
        "decoded": draw(st.one_of(st.just('{"a":1}'), weird_text, st.none())),
    }
    for name in draw(st.lists(st.sampled_from(sorted(row)), max_size=2, unique=True)):
        del row[name]
    text = json.dumps(row, allow_nan=True)
    if draw(st.integers(0, 5)) == 0:
        text = text[:-1] + ', "op": "create", "op": "delete"}'
    return _mutate_text(text.encode(), draw) if draw(st.integers(0, 3)) == 0 else text.encode()
