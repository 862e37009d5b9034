"""ZooKeeper payloads decoded with the protobuf library and the project's .proto files."""

from __future__ import annotations

import json

from capture.zk_decode import decode_znode
from capture.zk_proto import bookkeeper_metadata_pb2 as bk
from capture.zk_proto import managed_ledger_pb2 as ml

LEDGER = "/ledgers/00/0000/L0012"
TOPIC_ML = "/managed-ledgers/public/default/persistent/orders"


def _decoded(path: str, data: bytes) -> dict:
    return json.loads(decode_znode(path, data)[1])


def _length_delimited(message: bytes) -> bytes:
    out, n = bytearray(), len(message)
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out) + message


def _ledger(**fields) -> bk.LedgerMetadataFormat:
    meta = bk.LedgerMetadataFormat(quorumSize=2, ensembleSize=3, length=0, **fields)
    meta.segment.add(ensembleMember=["a:3181", "b:3181", "c:3181"], firstEntryId=0)
    return meta


def test_ledger_metadata_with_a_field_from_a_newer_writer():
    meta = _ledger(state=bk.LedgerMetadataFormat.CLOSED, lastEntryId=99, ackQuorumSize=2)
    unknown_field_99 = bytes([0x98, 0x06, 0x07])  # field 99, varint 7: not in the .proto
    data = b"BookieMetadataFormatVersion\t3\n" + _length_delimited(
        meta.SerializeToString() + unknown_field_99
    )
    decoded = _decoded(LEDGER, data)
    assert (decoded["state"], decoded["last_entry_id"], decoded["unknown_fields"]) == (
        "CLOSED",
        99,
        1,
    )
    assert decoded["ensemble"] == "a:3181, b:3181, c:3181"


def test_ledger_metadata_format_2_is_text_format():
    text = (
        "quorumSize: 2\nensembleSize: 2\nlength: 0\nlastEntryId: -1\nstate: IN_RECOVERY\n"
        'segment {\n  ensembleMember: "a:3181"\n  ensembleMember: "b:3181"\n  firstEntryId: 0\n}\n'
    )
    decoded = _decoded(LEDGER, b"BookieMetadataFormatVersion\t2\n" + text.encode())
    assert (decoded["format_version"], decoded["state"], decoded["segment_count"]) == (
        2,
        "IN_RECOVERY",
        1,
    )


def test_truncated_ledger_metadata_is_undecoded_not_an_error():
    data = b"BookieMetadataFormatVersion\t3\n" + _length_delimited(_ledger().SerializeToString())
    decoded = _decoded(LEDGER, data[:-3])
    assert decoded["undecoded"].startswith("DecodeError")


def test_bookie_service_info_properties_map():
    info = bk.BookieServiceInfoFormat(properties={"autorecovery.enabled": "true"})
    info.endpoints.add(id="bookie", port=3181, host="10.0.0.11", protocol="bookie-rpc")
    decoded = _decoded("/ledgers/available/10.0.0.11:3181", info.SerializeToString())
    assert decoded["properties"] == {"autorecovery.enabled": "true"}
    assert decoded["endpoints"][0]["port"] == 3181


def test_managed_ledger_and_cursor_by_path_depth():
    info = ml.ManagedLedgerInfo()
    info.ledgerInfo.add(ledgerId=12, entries=50000, size=1 << 20, timestamp=1700000000000)
    info.ledgerInfo.add(ledgerId=15, timestamp=0)
    decoded = _decoded(TOPIC_ML, info.SerializeToString())
    assert [entry["ledger_id"] for entry in decoded["ledgers"]] == [12, 15]
    assert decoded["ledgers"][1]["entries"] is None
    cursor = ml.ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=12, markDeleteEntryId=7)
    cursor.properties.add(name="producer-1", value=42)
    decoded = _decoded(TOPIC_ML + "/pulsar.dedup", cursor.SerializeToString())
    assert (decoded["cursors_ledger_id"], decoded["mark_delete_entry_id"]) == (-1, 7)
    assert decoded["properties"] == {"producer-1": 42}


def test_text_format_znodes_and_json():
    replicas = b'replica: "10.0.0.12:3181"\nctime: 1741083331000\n'
    path = "/ledgers/underreplication/ledgers/0000/0000/0000/000c/urL0000000012"
    assert _decoded(path, replicas) == {"replica": "10.0.0.12:3181", "ctime": 1741083331000}
    cookie = b'5\nbookieHost: "10.0.0.11:3181"\njournalDir: "data/journal"\n'
    assert _decoded("/ledgers/cookies/10.0.0.11:3181", cookie)["bookieHost"] == "10.0.0.11:3181"
    policies = b'{"deduplicationEnabled": true}'
    assert _decoded("/admin/policies/public/default", policies) == {"deduplicationEnabled": True}
