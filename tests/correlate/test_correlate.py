"""Correlation: causes ranked by rule and time; clock offsets from paired events."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.clock_skew import estimate_offsets, with_corrected_ts
from pipelines.correlate import cause_rules, rank_causes, with_causes
from pulsar_audit.schemas import CAUSE, INFRA_EVENTS

T0 = datetime(2025, 3, 4, 10, 0, 0)
TOPIC = "persistent://public/default/orders"
BUNDLE = "public/default/0x40000000_0x80000000"


def ms(n: float) -> datetime:
    return T0 + timedelta(milliseconds=n)


def events(spark, rows, detail=None, ledger=None):
    """rows: (event_id, ms, host, source, event_type, topic, bundle); every row with `ledger`
    and `detail`."""
    full = [
        (
            i,
            ms(t),
            ms(t),
            "reference" if src == "client" else "corrected",
            h,
            src,
            et,
            topic,
            bundle,
            ledger,
            None,
            detail,
            "raw",
            "f",
            1,
        )
        for i, t, h, src, et, topic, bundle in rows
    ]
    return spark.createDataFrame(full, INFRA_EVENTS)


def findings(spark, rows):
    """rows: (finding_id, kind, topic, partition, start_ms, end_ms)"""
    return spark.createDataFrame(
        [(f, k, t, p, ms(a), ms(b)) for f, k, t, p, a, b in rows],
        "finding_id string, kind string, topic string, partition int, "
        "start timestamp, end timestamp",
    )


def _causes(spark, finding_rows, event_rows):
    ranked = rank_causes(
        findings(spark, finding_rows),
        events(spark, event_rows),
        cause_rules(spark),
        before_ms=5000,
        after_ms=1000,
    )
    return {r.finding_id: [(c.event_type, c.host) for c in r.causes] for r in ranked.collect()}


def test_no_events_gives_no_causes(spark):
    assert _causes(spark, [("o1", "outage", TOPIC, -1, 1000, 1350)], []) == {}


def test_outage_first_cause_is_the_unload_of_its_bundle(spark):
    got = _causes(
        spark,
        [("o1", "outage", TOPIC, -1, 1000, 1350)],
        [
            ("e1", 990, "broker-1", "broker", "bundle_unload_started", None, BUNDLE),
            ("e2", 1002, "client", "client", "client_reconnect_scheduled", TOPIC, None),
            ("e3", 995, "broker-1", "broker", "ledger_created", TOPIC, None),  # no rule for outage
            ("e4", 990, "broker-2", "broker", "bundle_unload_started", None, "other/ns/0x0_0x1"),
            ("e5", -9000, "broker-1", "broker", "broker_shutdown", None, None),  # too early
            ("e6", 1200, "bookie-1", "bookie", "bookie_lost", None, None),  # cluster-wide
            ("e7", 998, "broker-1", "broker", "topic_unloading", TOPIC + "-other", None),
        ],
    )
    assert got == {
        "o1": [
            ("bundle_unload_started", "broker-1"),
            ("bookie_lost", "bookie-1"),
            ("client_reconnect_scheduled", "client"),
        ]
    }


def test_duplicates_first_cause_is_the_lost_zookeeper_session(spark):
    # A block written twice between its first send (1000) and its last ack (1600): the broker
    # lost its session and halted at 1003; the new owner recovered the ledger and acquired the
    # bundle later. The session loss names the fault; what followed ranks after it.
    got = _causes(
        spark,
        [("d1", "duplicated", TOPIC, -1, 1000, 1600)],
        [
            ("e1", 1003, "broker-1", "broker", "broker_shutdown", None, None),
            ("e2", 1003, "broker-1", "broker", "zk_session_lost", None, None),
            ("e3", 1400, "broker-2", "broker", "bundle_ownership_acquired", None, BUNDLE),
            ("e4", 1450, "broker-2", "broker", "ledger_recovery", TOPIC, None),
        ],
    )
    assert got == {
        "d1": [
            ("zk_session_lost", "broker-1"),
            ("broker_shutdown", "broker-1"),
            ("bundle_ownership_acquired", "broker-2"),
            ("ledger_recovery", "broker-2"),
        ]
    }


def test_a_fact_logged_twice_is_one_cause(spark):
    # Pulsar 4.0.7's broker logs a lost ZooKeeper session from two loggers in the same
    # millisecond (ZKSessionWatcher, then PulsarService): two events, one fact. A second loss
    # a second later is another fact and stays.
    got = _causes(
        spark,
        [("d1", "duplicated", TOPIC, -1, 1000, 1600)],
        [
            ("e1", 990, "broker-2", "broker", "zk_session_lost", None, None),
            ("e2", 990, "broker-2", "broker", "zk_session_lost", None, None),
            ("e3", 1450, "broker-1", "broker", "ledger_recovery", TOPIC, None),
            ("e4", 1990, "broker-2", "broker", "zk_session_lost", None, None),
        ],
    )
    assert got == {
        "d1": [
            ("zk_session_lost", "broker-2"),
            ("zk_session_lost", "broker-2"),
            ("ledger_recovery", "broker-1"),
        ]
    }


def test_poll_skip_first_cause_is_the_skipped_ledger(spark):
    got = _causes(
        spark,
        [("k1", "poll_skip", TOPIC, -1, 5000, 5000)],
        [
            ("e1", 1000, "bookie-1", "bookie", "bookie_lost", None, None),
            ("e2", 4900, "broker-1", "broker", "ledger_read_failed", TOPIC, None),
            ("e3", 4950, "broker-1", "broker", "ledger_skipped_lost", TOPIC, None),
            ("e4", 4990, "broker-1", "broker", "bundle_unload_started", None, BUNDLE),
        ],
    )
    assert got == {
        "k1": [
            ("ledger_skipped_lost", "broker-1"),
            ("ledger_read_failed", "broker-1"),
            ("bookie_lost", "bookie-1"),
        ]
    }


def test_a_cursor_recovered_past_a_lost_message_names_its_position(spark):
    # apache/pulsar#18236 on 2.10.2: the killed owner's successor recovered the subscription's
    # cursor to 1:0; seq 0 (stored at 1:0) then counted as consumed and was never delivered.
    finding = [("l1", "lost", TOPIC, -1, 1000, 1000)]
    event = ("e1", 40_000, "broker-2", "broker", "cursor_recovered", TOPIC, None)
    ranked = rank_causes(
        findings(spark, finding),
        events(spark, [event], detail='{"cursor":"audit-1c1fb6af","entry_id":"0"}', ledger=1),
        cause_rules(spark),
        before_ms=5000,
        after_ms=1000,
    )
    [row] = ranked.collect()
    [cause] = row.causes
    assert cause.reason == (
        f"cursor_recovered ({TOPIC}, cursor audit-1c1fb6af at 1:0 on broker-2, 39000 ms after it "
        "began): a broker that loaded the topic recovered the subscription's cursor to this "
        "position: every entry up to it counts as consumed, delivered or not"
    )


def test_with_causes_fills_matches_and_empties_the_rest(spark):
    outages = spark.createDataFrame([("o1",), ("o2",)], "outage_id string").withColumn(
        "causes", F.array().cast(T.ArrayType(CAUSE, False))
    )
    ranked = rank_causes(
        findings(spark, [("o1", "outage", TOPIC, -1, 1000, 1350)]),
        events(spark, [("e1", 990, "broker-1", "broker", "bundle_unload_started", None, BUNDLE)]),
        cause_rules(spark),
        5000,
        1000,
    )
    got = {r.outage_id: r.causes for r in with_causes(outages, ranked, "outage_id").collect()}
    assert got["o2"] == []
    [cause] = got["o1"]
    assert cause.reason == (
        f"bundle_unload_started ({BUNDLE} on broker-1, 10 ms before it began): unloading the "
        "topic's bundle disconnects its producers and consumers; clients reconnect with "
        "exponential backoff (100, 200, 400 ms ...)"
    )


def test_clock_offset_from_disconnect_and_reconnect_pairs(spark):
    evs = events(
        spark,
        [
            ("b1", 1250, "broker-1", "broker", "producer_disconnected", TOPIC, None),
            ("c1", 1000, "client", "client", "client_reconnect_scheduled", TOPIC, None),
            ("b2", 5260, "broker-1", "broker", "producer_disconnected", TOPIC, None),
            ("c2", 5000, "client", "client", "client_reconnect_scheduled", TOPIC, None),
            ("b3", 1000, "broker-2", "broker", "bundle_unload_started", None, BUNDLE),
        ],
    )
    offsets = estimate_offsets(evs)
    [row] = offsets.collect()
    assert (row.host, row.offset_ms, row.matches, row.spread_ms) == ("broker-1", 250.0, 2, 10.0)
    corrected = {r.event_id: r.corrected_ts for r in with_corrected_ts(evs, offsets).collect()}
    assert (
        corrected["b1"] == ms(1000) and corrected["c1"] == ms(1000) and corrected["b3"] == ms(1000)
    )
