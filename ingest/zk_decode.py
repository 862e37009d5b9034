"""Readable text for the znodes Pulsar and BookKeeper keep in ZooKeeper.

* `/ledgers/…/L<id>`: `BookieMetadataFormatVersion\\t3\\n` + length-delimited protobuf
  LedgerMetadataFormat (state, quorums, ensembles per segment, custom metadata); version 2
  is protobuf text format, kept as text.
* `/ledgers/available[/readonly]/<bookie>`: protobuf BookieServiceInfoFormat (endpoints).
* `/managed-ledgers/…`: protobuf ManagedLedgerInfo (ledger list) or ManagedCursorInfo.
* underreplication, cookies, locks: protobuf text format; policies, brokers, ownership: JSON.

No protobuf library is needed: a small wire-format reader walks the fields by number.
"""

from __future__ import annotations

import base64
import json
from typing import Any

LEDGER_STATES = {1: "OPEN", 2: "IN_RECOVERY", 3: "CLOSED"}
DIGESTS = {1: "CRC32", 2: "HMAC", 3: "CRC32C", 4: "DUMMY"}
LEDGER_HEADER = b"BookieMetadataFormatVersion\t"

Fields = list[tuple[int, Any]]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def parse_fields(buf: bytes) -> Fields:
    """(field number, value) pairs of one protobuf message: ints or raw bytes."""
    fields: Fields = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = int.from_bytes(buf[pos : pos + size], "little"), pos + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        fields.append((number, value))
    return fields


def _all(fields: Fields, number: int) -> list[Any]:
    return [v for n, v in fields if n == number]


def _one(fields: Fields, number: int, default: Any = None) -> Any:
    values = _all(fields, number)
    return values[-1] if values else default


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def decode_ledger_metadata(data: bytes) -> dict[str, Any]:
    """BookKeeper ledger metadata (format 3) → dict; format 2 text is returned as text."""
    header, _, rest = data.partition(b"\n")
    version = int(header[len(LEDGER_HEADER) :] or 0)
    if version < 3:
        return {"format_version": version, "text": _text(rest)}
    length, pos = _varint(rest, 0)
    fields = parse_fields(rest[pos : pos + length])
    segments = []
    for seg in _all(fields, 6):
        sf = parse_fields(seg)
        ensemble = [_text(b) for b in _all(sf, 1)]
        segments.append({"first_entry_id": _signed(_one(sf, 2, 0)), "ensemble": ensemble})
    custom = {}
    for entry in _all(fields, 11):
        ef = parse_fields(entry)
        custom[_text(_one(ef, 1, b""))] = _text(_one(ef, 2, b""))
    return {
        "format_version": version,
        "state": LEDGER_STATES.get(_one(fields, 5), str(_one(fields, 5))),
        "ensemble_size": _one(fields, 2),
        "write_quorum": _one(fields, 1),
        "ack_quorum": _one(fields, 9, _one(fields, 1)),
        "last_entry_id": _signed(_one(fields, 4, (1 << 64) - 1)),
        "length": _one(fields, 3),
        "digest": DIGESTS.get(_one(fields, 7)),
        "ctime": _one(fields, 10),
        "segments": segments,
        "segment_count": len(segments),
        "ensemble": ", ".join(segments[-1]["ensemble"]) if segments else None,
        "custom_metadata": custom,
    }


def decode_bookie_info(data: bytes) -> dict[str, Any]:
    """BookieServiceInfoFormat: endpoints (6) and properties (7)."""
    fields = parse_fields(data)
    endpoints = []
    for ep in _all(fields, 6):
        f = parse_fields(ep)
        endpoints.append(
            {"id": _text(_one(f, 1, b"")), "port": _one(f, 2), "host": _text(_one(f, 3, b""))}
            | {"protocol": _text(_one(f, 4, b""))}
        )
    properties = {}
    for prop in _all(fields, 7):
        f = parse_fields(prop)
        properties[_text(_one(f, 1, b""))] = _text(_one(f, 2, b""))
    return {"endpoints": endpoints, "properties": properties}


def decode_managed_ledger(data: bytes) -> dict[str, Any]:
    """ManagedLedgerInfo: ledgerInfo (1: ledgerId, entries, size, timestamp), terminatedPosition."""
    fields = parse_fields(data)
    ledgers = []
    for info in _all(fields, 1):
        f = parse_fields(info)
        ledgers.append(
            {"ledger_id": _one(f, 1), "entries": _one(f, 2), "size": _one(f, 3)}
            | {"timestamp": _one(f, 4)}
        )
    return {"ledgers": ledgers}


def _text_format(data: str) -> dict[str, Any]:
    """Protobuf text format `key: "value"` lines → dict (repeated keys become lists)."""
    out: dict[str, Any] = {}
    for line in data.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        value = value.strip().strip('"')
        if key.strip() in out:
            previous = out[key.strip()]
            out[key.strip()] = (previous if isinstance(previous, list) else [previous]) + [value]
        else:
            out[key.strip()] = value
    return out


def _decode(path: str, data: bytes) -> Any:
    if data.startswith(LEDGER_HEADER):
        return decode_ledger_metadata(data)
    if path.startswith("/ledgers/available/") and not path.endswith("/readonly"):
        return decode_bookie_info(data)
    text = data.decode("utf-8")  # UnicodeDecodeError → binary, handled by the caller
    if text.lstrip().startswith(("{", "[")):
        return json.loads(text)
    if path.startswith("/ledgers/underreplication/") or path.startswith("/ledgers/cookies/"):
        return _text_format(text)
    return {"text": text}


def decode_znode(path: str, data: bytes | None) -> tuple[str | None, str | None]:
    """(data, decoded) for a znode: data as text (or base64: for binary); decoded as JSON."""
    if not data:
        return None, None
    try:
        raw = data.decode("utf-8")
        if "\x00" in raw:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "binary")
    except UnicodeDecodeError:
        raw = "base64:" + base64.b64encode(data).decode("ascii")
    try:
        if path.startswith("/managed-ledgers/"):
            decoded: Any = _managed_ledger_or_cursor(path, data)
        else:
            decoded = _decode(path, data)
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        decoded = {"undecoded": f"{type(exc).__name__}: {exc}"}
    return raw, json.dumps(decoded, separators=(",", ":"), sort_keys=True)


def _managed_ledger_or_cursor(path: str, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        pass
    fields = parse_fields(data)
    if fields and fields[0][0] == 1 and isinstance(fields[0][1], bytes):
        return decode_managed_ledger(data)
    # ManagedCursorInfo: cursorsLedgerId (1), markDeleteLedgerId (2), markDeleteEntryId (3)
    return {
        "cursors_ledger_id": _signed(_one(fields, 1, 0)),
        "mark_delete_ledger_id": _one(fields, 2),
        "mark_delete_entry_id": _signed(_one(fields, 3, 0)),
    }
