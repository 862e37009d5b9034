"""Clocks a whole number of hours apart (a wrong --tz) are reported, not silently unpaired."""

from __future__ import annotations

from datetime import datetime, timedelta

from pipelines.clock_skew import describe_whole_hour_offset, whole_hour_offsets
from pulsar_audit.schemas import INFRA_EVENTS

T = "persistent://public/default/orders"
T0 = datetime(2026, 3, 1, 10, 0, 0)


def _event(n: int, ts: datetime, host: str, source: str, event_type: str) -> tuple:
    """The first INFRA_EVENTS columns; the rest are null."""
    return (f"e{n}", ts, ts, "uncorrected", host, source, event_type, T)


def _events(spark, rows: list[tuple]):
    full = [row + (None,) * (len(INFRA_EVENTS.fields) - len(row)) for row in rows]
    return spark.createDataFrame(full, INFRA_EVENTS)


def test_no_events_no_warning(spark):
    assert whole_hour_offsets(_events(spark, [])).count() == 0


def test_a_broker_two_hours_ahead_of_the_client_logs(spark):
    rows = []
    for n in range(3):
        client_ts = T0 + timedelta(minutes=n)
        broker_ts = client_ts + timedelta(hours=2, milliseconds=-40)  # closes just before
        rows += [
            _event(2 * n, broker_ts, "broker-1", "broker", "producer_disconnected"),
            _event(2 * n + 1, client_ts, "app", "client", "client_reconnect_scheduled"),
        ]
    # a broker whose clock agrees with the client's is not reported
    rows += [
        _event(10, T0 + timedelta(seconds=1), "broker-2", "broker", "producer_disconnected"),
        _event(11, T0 + timedelta(seconds=1.1), "app", "client", "client_reconnect_scheduled"),
    ]
    found = whole_hour_offsets(_events(spark, rows)).collect()
    assert [(r.host, r.hours, r.matches) for r in found] == [("broker-1", 2, 3)]
    assert describe_whole_hour_offset("broker-1", 2, 3).startswith(
        "broker-1's log times are 2 h ahead of the client logs' in 3 paired event(s)"
    )
