"""Readable text for the znodes Pulsar and BookKeeper keep in ZooKeeper.

Binary payloads are decoded by the `protobuf` library with the project's own descriptions of
the formats (capture/zk_proto/*.proto, generated into *_pb2.py by scripts/gen_proto.sh), so
every field type, unknown fields and newer writers are handled as protobuf defines:

* `/ledgers/…/L<id>`: `BookieMetadataFormatVersion\\t3\\n` + length-delimited
  LedgerMetadataFormat (state, quorums, ensembles per segment, custom metadata); format 2 is
  the same message in protobuf text format.
* `/ledgers/available[/readonly]/<bookie>`: BookieServiceInfoFormat (endpoints, properties).
* `/managed-ledgers/<tenant>/<ns>/<domain>/<topic>`: ManagedLedgerInfo (ledger list);
  one level deeper, `/<cursor>`: ManagedCursorInfo. Either may also be JSON.
* underreplication, locks, cookies: protobuf text format; policies, brokers, ownership: JSON.

Decoded values are JSON objects with stable snake_case keys (pipelines.zk_events reads
`state`, `segment_count`, `ensemble`, `replica`); `unknown_fields` counts the fields a
payload has beyond those described, e.g. written by a newer version.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import text_format
from google.protobuf.message import DecodeError, Message

from capture.zk_proto import bookkeeper_metadata_pb2 as bk
from capture.zk_proto import managed_ledger_pb2 as ml

LEDGER_HEADER = b"BookieMetadataFormatVersion\t"
_ML_ROOT = "/managed-ledgers/"
_TOPIC_DEPTH = 4  # tenant / namespace / domain / topic


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The length prefix of a length-delimited message (framing, not message content)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise DecodeError("truncated length prefix")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _unknown_count(message: Message) -> int:
    """Fields in the payload that the .proto does not describe, in the message and below."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    count = len(UnknownFieldSet(message))
    for field, value in message.ListFields():
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            continue
        children = value if field.is_repeated else [value]
        count += sum(_unknown_count(child) for child in children)
    return count


def _parse(message: Message, data: bytes) -> Message:
    message.ParseFromString(data)
    return message


def _enum_name(message: Message, field: str) -> str | None:
    if not message.HasField(field):
        return None
    descriptor = message.DESCRIPTOR.fields_by_name[field].enum_type
    value = getattr(message, field)
    known = descriptor.values_by_number.get(value)
    return known.name if known else str(value)


def _ledger_dict(meta: bk.LedgerMetadataFormat, version: int) -> dict[str, Any]:
    segments = [
        {"first_entry_id": s.firstEntryId, "ensemble": list(s.ensembleMember)} for s in meta.segment
    ]
    return {
        "format_version": version,
        "state": _enum_name(meta, "state"),
        "ensemble_size": meta.ensembleSize if meta.HasField("ensembleSize") else None,
        "write_quorum": meta.quorumSize if meta.HasField("quorumSize") else None,
        "ack_quorum": meta.ackQuorumSize if meta.HasField("ackQuorumSize") else meta.quorumSize,
        "last_entry_id": meta.lastEntryId if meta.HasField("lastEntryId") else -1,
        "length": meta.length,
        "digest": _enum_name(meta, "digestType"),
        "ctime": meta.ctime if meta.HasField("ctime") else None,
        "segments": segments,
        "segment_count": len(segments),
        "ensemble": ", ".join(segments[-1]["ensemble"]) if segments else None,
        "custom_metadata": {e.key: e.value.decode("utf-8", "replace") for e in meta.customMetadata},
        "unknown_fields": _unknown_count(meta),
    }


def decode_ledger_metadata(data: bytes) -> dict[str, Any]:
    """BookKeeper ledger metadata → dict: format 3 binary, format 2 text (else kept as text)."""
    header, _, rest = data.partition(b"\n")
    version = int(header[len(LEDGER_HEADER) :] or 0)
    meta = bk.LedgerMetadataFormat()
    if version < 3:
        text = rest.decode("utf-8", "replace")
        try:
            text_format.Parse(text, meta, allow_unknown_field=True)
        except text_format.ParseError:
            return {"format_version": version, "text": text}
        return _ledger_dict(meta, version)
    length, pos = _varint(rest, 0)
    if pos + length > len(rest):
        raise DecodeError(f"ledger metadata of {length} bytes, only {len(rest) - pos} present")
    return _ledger_dict(_parse(meta, rest[pos : pos + length]), version)


def decode_bookie_info(data: bytes) -> dict[str, Any]:
    """BookieServiceInfoFormat: endpoints and properties."""
    info = _parse(bk.BookieServiceInfoFormat(), data)
    endpoints = [
        {"id": e.id, "port": e.port, "host": e.host, "protocol": e.protocol} for e in info.endpoints
    ]
    return {
        "endpoints": endpoints,
        "properties": dict(info.properties),
        "unknown_fields": _unknown_count(info),
    }


def decode_managed_ledger(data: bytes) -> dict[str, Any]:
    """ManagedLedgerInfo: the ledgers (id, entries, size, timestamp), terminated position."""
    info = _parse(ml.ManagedLedgerInfo(), data)
    ledgers = [
        {
            "ledger_id": i.ledgerId,
            "entries": i.entries if i.HasField("entries") else None,
            "size": i.size if i.HasField("size") else None,
            "timestamp": i.timestamp if i.HasField("timestamp") else None,
        }
        for i in info.ledgerInfo
    ]
    decoded: dict[str, Any] = {"ledgers": ledgers, "unknown_fields": _unknown_count(info)}
    if info.HasField("terminatedPosition"):
        position = info.terminatedPosition
        decoded["terminated_at"] = f"{position.ledgerId}:{position.entryId}"
    return decoded


def decode_managed_cursor(data: bytes) -> dict[str, Any]:
    """ManagedCursorInfo: the cursor's ledger, mark-delete position and properties."""
    cursor = _parse(ml.ManagedCursorInfo(), data)
    return {
        "cursors_ledger_id": cursor.cursorsLedgerId,
        "mark_delete_ledger_id": cursor.markDeleteLedgerId
        if cursor.HasField("markDeleteLedgerId")
        else None,
        "mark_delete_entry_id": cursor.markDeleteEntryId,
        "individually_deleted_ranges": len(cursor.individualDeletedMessages),
        "properties": {p.name: p.value for p in cursor.properties},
        "cursor_properties": {p.name: p.value for p in cursor.cursorProperties},
        "unknown_fields": _unknown_count(cursor),
    }


_TEXT_FORMATS = {
    "/ledgers/underreplication/ledgers/": bk.UnderreplicatedLedgerFormat,
    "/ledgers/underreplication/locks/": bk.LockDataFormat,
    "/ledgers/cookies/": bk.CookieFormat,
}


def _text_format(path: str, text: str) -> dict[str, Any]:
    """Protobuf text format → dict (repeated fields as lists); a cookie's version line first."""
    message_type = next((t for p, t in _TEXT_FORMATS.items() if path.startswith(p)), None)
    if message_type is None:
        return {"text": text}
    head, _, body = text.partition("\n")
    if path.startswith("/ledgers/cookies/") and head.strip().isdigit():
        text = body
    message = text_format.Parse(text, message_type(), allow_unknown_field=True)
    decoded: dict[str, Any] = {}
    for field, value in message.ListFields():
        decoded[field.name] = list(value) if field.is_repeated else value
    if "replica" in decoded:
        # one replica stays a string, as zk_events reads `$.replica` as the lost bookie(s)
        replicas = decoded["replica"]
        decoded["replica"] = replicas[0] if len(replicas) == 1 else replicas
    return decoded


def _decode(path: str, data: bytes) -> Any:
    if data.startswith(LEDGER_HEADER):
        return decode_ledger_metadata(data)
    if path.startswith("/ledgers/available/") and not path.endswith("/readonly"):
        return decode_bookie_info(data)
    text = data.decode("utf-8")  # UnicodeDecodeError → binary, handled by the caller
    if text.lstrip().startswith(("{", "[")):
        return json.loads(text)
    return _text_format(path, text)


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
        if path.startswith(_ML_ROOT):
            decoded: Any = _managed_ledger_or_cursor(path, data)
        else:
            decoded = _decode(path, data)
    except (ValueError, IndexError, UnicodeDecodeError, DecodeError) as exc:
        decoded = {"undecoded": f"{type(exc).__name__}: {exc}"}
    return raw, json.dumps(decoded, separators=(",", ":"), sort_keys=True)


def _managed_ledger_or_cursor(path: str, data: bytes) -> Any:
    """By the path's depth: a topic's ManagedLedgerInfo, or one level below, a cursor."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        pass
    depth = len(path[len(_ML_ROOT) :].strip("/").split("/"))
    if depth > _TOPIC_DEPTH:
        return decode_managed_cursor(data)
    return decode_managed_ledger(data)
