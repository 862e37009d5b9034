"""Infra events from real log lines of every supported kind, ZooKeeper changes, clock offsets."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import Row

from ingest.logs import ingest_log_folders
from pipelines.clock_skew import with_corrected_ts
from pipelines.infra_events import build_infra_events, match_log_events
from pipelines.zk_events import zk_change_events
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import CLOCK_OFFSETS, LOG_LINES, ZK_CHANGES

DISK_LOSS_BROKER = "real-disk-loss-broker.log"
CURSOR_BROKER = "real-18236-broker.log"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
FILES = {
    "broker": ["broker-standalone.log", "broker-dedup.log", "pulsar-broker-broker-1.log"]
    + ["real-kill-bookie-broker.log", "real-kill-broker-broker.log", "real-zk-pause-broker.log"]
    + ["reference-forms-broker.log", "real-transfer-broker.log", DISK_LOSS_BROKER]
    + [CURSOR_BROKER],
    "bookie": ["bookie-standalone.log", "pulsar-bookie-bk1.log", "real-kill-bookie-bookie.log"]
    + ["real-kill-broker-bookie.log", "real-zk-pause-bookie.log", "reference-forms-bookie.log"],
    "client": ["client-unload.log"],
}
T2, BUNDLE = "persistent://public/default/t2", "public/default/0x40000000_0x80000000"
ORDERS = "persistent://public/default/orders"
# the real 2-broker / 3-bookie runs (E-Qw-Qa 2-2-2): kill -9 of a bookie, of a broker
KB = "persistent://public/default/audit-kill-bookie-20261122T034137-1c33"
KBR = "persistent://public/default/audit-kill-broker-20261122T034155-c144"
CHANGES = "persistent://public/default/__change_events"
B1, B2, B3 = "127.0.0.1:57761", "127.0.0.1:46993", "127.0.0.1:36305"  # bookie-1 was killed
KILL_BOOKIE_BROKER = "real-kill-bookie-broker.log"
KILL_BROKER_BROKER = "real-kill-broker-broker.log"
TRANSFERRED = "public/default/0xf0000000_0xffffffff"
# the write quorum's disks wiped at 2-2-1, brokers skipping non-recoverable data (issue 27)
WIPED = "persistent://public/default/audit-wipe-qw-bookies-disk-20261126T073452-20a8"
# apache/pulsar#18236 on 2.10.2 (line 1: recovered to 1:0) and on 2.10.3 (line 2: to 1:-1)
CURSOR_TOPIC = "persistent://public/default/audit-kill-broker-20261126T095651-9544"

# (file, line) → (event_type, topic, bundle, ledger_id, bookie): one per real or reference form
EXPECTED = {
    ("broker-standalone.log", 2): ("broker_start", None, None, None, None),
    ("broker-standalone.log", 4): ("bookie_registered", None, None, None, "bk0test"),
    ("broker-standalone.log", 7): ("bundle_ownership_acquired", None, BUNDLE, None, None),
    ("broker-standalone.log", 8): ("managed_ledger_opened", T2, None, None, None),
    ("broker-standalone.log", 9): ("ledger_created", T2, None, 3, None),
    ("broker-standalone.log", 10): ("topic_loaded", T2, None, None, None),
    ("broker-standalone.log", 11): ("producer_created", T2, None, None, None),
    ("broker-standalone.log", 12): ("bundle_unload_requested", None, BUNDLE, None, None),
    ("broker-standalone.log", 13): ("ledger_ensemble", None, None, 3, "bk0test"),
    ("broker-standalone.log", 14): ("bundle_unload_started", None, BUNDLE, None, None),
    ("broker-standalone.log", 15): ("topic_unloading", T2, None, None, None),
    ("broker-standalone.log", 16): ("producer_disconnected", T2, None, None, None),
    ("broker-standalone.log", 17): ("managed_ledger_closed", T2, None, None, None),
    ("broker-standalone.log", 18): ("topic_closed", T2, None, None, None),
    ("broker-standalone.log", 20): ("bundle_lock_expired", None, BUNDLE, None, None),
    ("broker-standalone.log", 21): ("bundle_ownership_released", None, BUNDLE, None, None),
    ("broker-standalone.log", 22): ("bundle_unload_finished", None, BUNDLE, None, None),
    ("broker-standalone.log", 24): ("bookie_write_error", None, None, 3, None),
    ("broker-standalone.log", 32): ("bundle_topics_loaded", None, BUNDLE, None, None),
    ("broker-standalone.log", 35): ("producer_closed", T2, None, None, None),
    ("broker-standalone.log", 36): ("connection_closed", None, None, None, None),
    ("broker-standalone.log", 37): ("broker_shutdown", None, None, None, None),
    ("broker-standalone.log", 53): ("zk_disconnected", None, None, None, None),
    ("broker-dedup.log", 1): ("consumer_created", T2, None, None, None),
    ("broker-dedup.log", 2): ("consumer_closed", None, None, None, None),
    ("broker-dedup.log", 3): ("dedup_replay", "persistent://public/default/t4", None, None, None),
    ("broker-dedup.log", 4): ("dedup_enabled", "persistent://public/default/t4", None, None, None),
    ("broker-dedup.log", 8): (
        "consumer_disconnected",
        "persistent://public/default/__change_events",
        None,
        None,
        None,
    ),
    ("pulsar-broker-broker-1.log", 2): (
        "ensemble_placement_warning",
        None,
        None,
        None,
        "127.0.0.1:3191, 127.0.0.1:3192",
    ),
    ("pulsar-broker-broker-1.log", 3): (
        "ledger_ensemble",
        None,
        None,
        2,
        "127.0.0.1:3191, 127.0.0.1:3192",
    ),
    ("bookie-standalone.log", 1): ("zk_connected", None, None, None, None),
    ("bookie-standalone.log", 3): ("bookie_start", None, None, None, None),
    ("bookie-standalone.log", 4): ("bookie_registered", None, None, None, None),
    ("bookie-standalone.log", 6): ("bookie_shutdown", None, None, None, None),
    ("bookie-standalone.log", 7): ("bookie_read_only", None, None, None, None),
    ("pulsar-bookie-bk1.log", 2): ("bookie_start", None, None, None, None),
    ("pulsar-bookie-bk1.log", 3): ("bookie_start_failed", None, None, None, None),
    ("client-unload.log", 7): ("client_producer_created", T2, None, None, None),
    ("client-unload.log", 9): ("client_producer_disconnected", None, None, None, None),
    ("client-unload.log", 10): ("client_reconnect_scheduled", T2, None, None, None),
    ("client-unload.log", 11): ("client_invalid_producer_receipt", None, None, None, None),
    ("client-unload.log", 15): (
        "client_producer_closed",
        "persistent://public/default/t5",
    )
    + (None, None, None),
    ("client-unload.log", 16): (
        "client_consumer_created",
        "persistent://public/default/t5",
    )
    + (None, None, None),
    ("client-unload.log", 17): (
        "client_consumer_closed",
        "persistent://public/default/t5",
    )
    + (None, None, None),
    ("client-unload.log", 18): ("client_connection_closed", None, None, None, None),
    (KILL_BOOKIE_BROKER, 1): ("ledger_ensemble", None, None, 4, f"{B2}, {B1}"),
    (KILL_BOOKIE_BROKER, 2): ("ledger_created", KB, None, 4, None),
    (KILL_BOOKIE_BROKER, 4): ("bookie_write_error", None, None, 4, B1),
    (KILL_BOOKIE_BROKER, 5): ("bookie_replaced", None, None, None, B1),
    (KILL_BOOKIE_BROKER, 6): ("bookie_write_error", None, None, 4, B1),
    (KILL_BOOKIE_BROKER, 7): ("new_ensemble", None, None, 4, f"{B2}, {B3}"),
    (KILL_BOOKIE_BROKER, 8): ("ensemble_placement_warning", None, None, None, f"{B3}, {B1}"),
    (KILL_BOOKIE_BROKER, 9): ("ledger_ensemble", None, None, 5, f"{B3}, {B1}"),
    (KILL_BOOKIE_BROKER, 10): ("bookie_write_error", None, None, 5, B1),
    (KILL_BOOKIE_BROKER, 11): ("bookie_replaced", None, None, None, B1),
    (KILL_BOOKIE_BROKER, 12): ("new_ensemble", None, None, 5, f"{B3}, {B2}"),
    (KILL_BOOKIE_BROKER, 13): ("bookie_lost", None, None, None, B1),
    ("real-kill-bookie-bookie.log", 1): ("bookie_start", None, None, None, None),
    ("real-kill-bookie-bookie.log", 2): ("bookie_start", None, None, None, None),
    ("real-kill-bookie-bookie.log", 3): ("bookie_registered", None, None, None, None),
    ("real-kill-bookie-bookie.log", 4): ("bookie_registered", None, None, None, B1),
    ("real-kill-bookie-bookie.log", 7): ("bookie_start_failed", None, None, None, None),
    ("real-kill-bookie-bookie.log", 9): ("bookie_shutdown", None, None, None, None),
    (KILL_BROKER_BROKER, 1): ("client_reconnect_scheduled", CHANGES, None, None, None),
    (KILL_BROKER_BROKER, 2): ("client_reconnect_scheduled", CHANGES, None, None, None),
    (KILL_BROKER_BROKER, 4): ("broker_start", None, None, None, None),
    (KILL_BROKER_BROKER, 5): ("bundle_ownership_lost", None)
    + ("public/default/0xb0000000_0xc0000000", None, None),
    (KILL_BROKER_BROKER, 6): ("bundle_ownership_acquired", None)
    + ("public/default/0xb0000000_0xc0000000", None, None),
    (KILL_BROKER_BROKER, 7): ("ledger_recovery", None, None, 0, None),
    (KILL_BROKER_BROKER, 8): ("managed_ledger_opened", KBR, None, None, None),
    (KILL_BROKER_BROKER, 9): ("ledger_recovery", None, None, 6, None),
    (KILL_BROKER_BROKER, 10): ("ledger_ensemble", None, None, 8, f"{B3}, {B2}"),
    (KILL_BROKER_BROKER, 11): ("ledger_created", KBR, None, 8, None),
    (KILL_BROKER_BROKER, 12): ("topic_loaded", KBR, None, None, None),
    ("real-kill-broker-bookie.log", 2): ("ledger_fenced", None, None, 0, None),
    ("real-kill-broker-bookie.log", 3): ("ledger_fenced", None, None, 0, None),
    ("real-kill-broker-bookie.log", 4): ("ledger_fenced", None, None, 6, None),
    ("real-zk-pause-broker.log", 1): ("zk_disconnected", None, None, None, None),
    ("real-zk-pause-broker.log", 2): ("zk_disconnected", None, None, None, None),
    ("real-zk-pause-broker.log", 3): ("zk_disconnected", None, None, None, None),
    ("real-zk-pause-broker.log", 4): ("zk_disconnected", None, None, None, None),
    ("real-zk-pause-broker.log", 5): ("zk_connected", None, None, None, None),
    ("real-zk-pause-broker.log", 7): ("zk_session_reestablished", None, None, None, None),
    ("real-zk-pause-broker.log", 8): ("zk_session_reestablished", None, None, None, None),
    ("real-zk-pause-bookie.log", 1): ("zk_disconnected", None, None, None, None),
    ("real-zk-pause-bookie.log", 2): ("zk_disconnected", None, None, None, None),
    ("real-zk-pause-bookie.log", 3): ("zk_disconnected", None, None, None, None),
    ("real-zk-pause-bookie.log", 4): ("zk_session_lost", None, None, None, None),
    ("real-zk-pause-bookie.log", 5): ("zk_session_lost", None, None, None, None),
    ("real-zk-pause-bookie.log", 6): ("zk_session_lost", None, None, None, None),
    ("real-zk-pause-bookie.log", 7): ("zk_session_lost", None, None, None, None),
    ("real-zk-pause-bookie.log", 8): ("zk_connected", None, None, None, None),
    ("real-zk-pause-bookie.log", 9): ("zk_session_reestablished", None, None, None, None),
    ("real-zk-pause-bookie.log", 10): ("zk_session_reestablished", None, None, None, None),
    ("real-zk-pause-bookie.log", 11): ("bookie_registered", None, None, None, B2),
    ("reference-forms-broker.log", 1): ("topic_fenced", ORDERS, None, None, None),
    ("reference-forms-broker.log", 2): ("topic_unfenced", ORDERS, None, None, None),
    ("reference-forms-broker.log", 3): ("ledger_closed", ORDERS, None, 12, None),
    ("reference-forms-broker.log", 4): ("ledger_closed", ORDERS, None, 12, None),
    ("reference-forms-broker.log", 5): ("ledger_created", ORDERS, None, 13, None),
    ("reference-forms-broker.log", 6): ("managed_ledger_fenced", ORDERS, None, None, None),
    ("reference-forms-broker.log", 7): ("bookie_read_only", None, None, None, "10.0.0.14:3181"),
    ("reference-forms-broker.log", 8): ("zk_session_lost", None, None, None, None),
    ("reference-forms-broker.log", 9): ("ledger_fenced", None, None, 12, "10.0.0.11:3181"),
    ("real-transfer-broker.log", 1): ("bundle_unload_requested", None, TRANSFERRED, None, None),
    ("real-transfer-broker.log", 2): ("bundle_transfer_started", None, TRANSFERRED, None, None),
    ("real-transfer-broker.log", 3): ("bundle_transferred", None, TRANSFERRED, None, None),
    (DISK_LOSS_BROKER, 1): ("ledger_read_failed", None, None, 3)
    + ("127.0.0.1:59651, 127.0.0.1:34191, 127.0.0.1:49163",),
    (DISK_LOSS_BROKER, 2): ("ledger_read_failed", WIPED, None, 3, None),
    (DISK_LOSS_BROKER, 3): ("ledger_skipped_lost", WIPED, None, 3, None),
    (CURSOR_BROKER, 1): ("cursor_recovered", CURSOR_TOPIC, None, 1, None),
    ("reference-forms-bookie.log", 1): ("bookie_read_only", None, None, None, None),
    ("reference-forms-bookie.log", 2): ("ledger_under_replicated", None, None, 12)
    + ("10.0.0.12:3181",),
    ("reference-forms-bookie.log", 3): ("ledger_re_replicated", None, None, 12, None),
}


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> Lakehouse:
    lakehouse = Lakehouse(
        spark, load_config("local", lakehouse=str(tmp_path_factory.mktemp("infra")))
    )
    # every fixture file in one pass, as `analyze` ingests a capture's logs (one commit per
    # table instead of one per file)
    ingest_log_folders(lakehouse, {s: [FIXTURES / n for n in names] for s, names in FILES.items()})
    build_infra_events(lakehouse)
    return lakehouse


def test_no_entries_give_no_events(spark):
    assert match_log_events(spark.createDataFrame([], LOG_LINES)).count() == 0


def test_every_supported_kind_from_fixture_lines(built):
    events = {
        (Path(r.source_file).name, r.line_number): r
        for r in built.read("infra_events").filter("source != 'zookeeper'").collect()
    }
    got = {
        key: (e.event_type, e.topic, e.bundle, e.ledger_id, e.bookie)
        for key, e in events.items()
        if key in EXPECTED
    }
    assert got == EXPECTED
    finished = events[("broker-standalone.log", 22)]
    assert finished.detail == '{"topics":"1","duration_ms":"73.0"}'
    assert finished.ts == datetime(2026, 11, 22, 2, 14, 9, 979000)
    assert finished.host == "broker-standalone"
    # The real broker and client lines pair up ("Disconnecting producer" on the broker, then
    # "Schedule reconnection" on the client): the broker's clock is corrected onto the client's.
    [offset] = built.read("clock_offsets").collect()
    assert (offset.host, offset.offset_ms, offset.matches) == ("broker-standalone", -9.0, 1)
    assert (finished.corrected_ts, finished.clock) == (
        datetime(2026, 11, 22, 2, 14, 9, 988000),
        "corrected",
    )
    receipt = events[("client-unload.log", 11)]
    assert receipt.detail == (
        '{"connection":"127.0.0.1:42478 -> 127.0.0.1:6650","producer_id":"0","seq":"40904"}'
    )
    replaced = events[(KILL_BOOKIE_BROKER, 5)]
    assert replaced.detail == f'{{"ensemble":"{B2}, {B1}","replacement":"{B3}"}}'
    transfer = events[("real-transfer-broker.log", 2)]
    assert transfer.detail == '{"to_broker":"127.0.0.1:36135"}'
    recovered = events[(KILL_BROKER_BROKER, 9)]
    assert recovered.detail == '{"entry_id":"10605"}'
    cursor = events[(CURSOR_BROKER, 1)]
    assert cursor.detail == '{"cursor":"audit-1c1fb6af","entry_id":"0"}'
    # a cursor recovered to before the first entry of a ledger (L:-1) consumed nothing there
    assert (CURSOR_BROKER, 2) not in events
    # lines that are no happening (connection setup, lookups, parse errors) give no event
    assert ("client-unload.log", 1) not in events
    assert ("broker-standalone.log", 1) not in events


def test_rebuild_is_idempotent(built):
    first = sorted(r.event_id for r in built.read("infra_events").select("event_id").collect())
    assert build_infra_events(built) == len(first)
    again = sorted(r.event_id for r in built.read("infra_events").select("event_id").collect())
    assert again == first


def test_corrected_ts_subtracts_the_host_offset(spark, built):
    events = built.read("infra_events").filter("host = 'bk1'")
    offsets = spark.createDataFrame([("bk1", 1500.0, 3, 2.0, "test")], CLOCK_OFFSETS)
    shifted = {r.line_number: r for r in with_corrected_ts(events, offsets).collect()}
    start = shifted[3]
    assert (start.ts, start.corrected_ts, start.clock) == (
        datetime(2026, 11, 22, 2, 17, 9, 104000),
        datetime(2026, 11, 22, 2, 17, 7, 604000),
        "corrected",
    )


def _zk(line: int, path: str, op: str, decoded: str | None = None) -> Row:
    return Row(
        ts=datetime(2026, 1, 1, 0, 0, line),
        zookeeper="zk1:2181",
        path=path,
        op=op,
        version=line,
        ephemeral_owner=None,
        data=None,
        decoded=decoded,
        capture_id="c",
        source_file="/cap.jsonl",
        line_number=line,
        ingest_id="i",
        ingested_at=datetime(2026, 1, 1),
    )


def test_zookeeper_changes_become_events(spark):
    ledger = "/ledgers/00/0000/L0012"
    seg = '{"state":"%s","segment_count":%d,"ensemble":"%s"}'
    rows = [
        _zk(1, "/namespace/public/default/0x00000000_0x40000000", "snapshot"),
        _zk(2, "/namespace/public/default/0x00000000_0x40000000", "delete"),
        _zk(3, "/ledgers/available/10.0.0.12:3181", "delete"),
        _zk(4, ledger, "create", seg % ("OPEN", 1, "a:1, b:1")),
        _zk(5, ledger, "change", seg % ("OPEN", 2, "a:1, c:1")),
        _zk(6, ledger, "change", seg % ("IN_RECOVERY", 2, "a:1, c:1")),
        _zk(7, ledger, "change", seg % ("CLOSED", 2, "a:1, c:1")),
        _zk(8, "/ledgers/underreplication/ledgers/0000/0000/0000/000c/urL0000000012", "create"),
        _zk(9, "/ledgers/available/readonly/10.0.0.14:3181", "create"),
        _zk(10, "/loadbalance/brokers/broker-1:8080", "delete"),
    ]
    events = zk_change_events(spark.createDataFrame(rows, ZK_CHANGES)).collect()
    got = sorted((e.line_number, e.event_type, e.bundle, e.ledger_id, e.bookie) for e in events)
    assert got == [
        (2, "bundle_ownership_released", "public/default/0x00000000_0x40000000", None, None),
        (3, "bookie_lost", None, None, "10.0.0.12:3181"),
        (4, "ledger_created", None, 12, "a:1, b:1"),
        (5, "new_ensemble", None, 12, "a:1, c:1"),
        (6, "ledger_recovery", None, 12, "a:1, c:1"),
        (7, "ledger_closed", None, 12, "a:1, c:1"),
        (8, "ledger_under_replicated", None, 12, None),
        (9, "bookie_read_only", None, None, "10.0.0.14:3181"),
        (10, "broker_lost", None, None, None),
    ]
    assert {e.source for e in events} == {"zookeeper"} and {e.host for e in events} == {"zk1:2181"}
