"""bench/latency_rules.py (bench/watch_latency.py's pure parts): the provable moment of each
provisional kind on literal rows, the nearest-rank percentile, the replay's pacing with the
clock injected. No Spark."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.latency_rules import (
    due_offsets,
    gaps_before,
    latency_table,
    percentile,
    provable_ts,
    replay,
    send_rate,
    written_at,
)

T0 = 1_700_000_000_000
RUN = {"run_id": "r", "topic": "t"}
STEP_MS, LOSS_MS = 100, 1000


def _event(event: str, ts: int, seq: int, **more: str) -> dict:
    client = {"client": "p1"} if event in ("send", "ack") else {"client": "c1"}
    return RUN | client | {"event": event, "ts": T0 + ts, "seq": seq} | more


def _received(ts: int, seq: int) -> dict:
    return _event("receive", ts, seq, subscription="s1", producer="p1")


def _alert(kind: str, title: str, first_ts_ms: int | None = None) -> dict:
    """An alert's payload as the webhook gets it: first_ts in ISO 8601 with an offset."""
    first = None
    if first_ts_ms is not None:
        first = datetime.fromtimestamp((T0 + first_ts_ms) / 1000, UTC).isoformat()
    return RUN | {"kind": kind, "title": title, "subscription": "s1", "first_ts": first}


TRACE = [
    _event("send", 0, 10),
    _event("ack", 5, 10),
    _event("ack", 40, 11),
    _received(50, 11),
    _received(70, 12),
    _event("ack", 900, 12),
]


def test_no_rule_and_no_trace_give_none() -> None:
    assert provable_ts(_alert("duplicated", "run r: duplicated"), TRACE, STEP_MS, LOSS_MS) is None
    loss = _alert("suspected_loss", "run r: suspected_loss (provisional, producer p1, seq 10)")
    assert provable_ts(loss, [], STEP_MS, LOSS_MS) is None


def test_outage_in_progress_is_provable_one_backoff_step_after_it_started() -> None:
    alert = _alert("outage_in_progress", "run r: outage_in_progress (provisional, producer p1)", 5)

    assert provable_ts(alert, TRACE, STEP_MS, LOSS_MS) == T0 + 105


def test_a_closed_outage_is_provable_at_the_ack_that_closed_it() -> None:
    alert = _alert("outage", "run r: outage of producer p1 for 860 ms", 40)

    assert provable_ts(alert, TRACE, STEP_MS, LOSS_MS) == T0 + 900


def test_suspected_loss_is_provable_the_threshold_after_the_first_later_delivery() -> None:
    title = "run r: suspected_loss (provisional, producer p1, seq 10–10) on subscription s1"
    alert = _alert("suspected_loss", title, 0)

    # seq 11 is the first later delivery (50 ms), after seq 10's ack (5 ms)
    assert provable_ts(alert, TRACE, STEP_MS, LOSS_MS) == T0 + 50 + LOSS_MS


def test_written_at_takes_the_first_line_at_or_after_the_proof() -> None:
    stamps, wall = [0.0, 100.0, 200.0], [10.0, 10.5, 11.0]

    assert written_at(stamps, wall, 100.0) == 10.5
    assert written_at(stamps, wall, 150.0) == 11.0
    assert written_at(stamps, wall, 201.0) is None


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]

    assert percentile([7.0], 99) == 7.0
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0


def test_pacing_keeps_the_recorded_pace_or_scales_it_to_a_rate() -> None:
    stamps = [T0, T0 + 500, T0 + 2000]

    assert due_offsets([], None, 0.0) == []
    assert due_offsets(stamps, None, 2.0) == [0.0, 0.5, 2.0]
    # sent at 2 msg/s, replayed at 8 msg/s: four times as fast, the pause too
    assert due_offsets(stamps, 8.0, 2.0) == [0.0, 0.125, 0.5]


def test_send_rate_is_the_pace_between_the_first_and_last_send() -> None:
    sends = [_event("send", ms, seq) for seq, ms in enumerate([0, 250, 500])]

    assert send_rate([]) == 0.0
    assert send_rate(sends[:1]) == 0.0
    assert send_rate([*sends, _event("ack", 9000, 2)]) == 4.0


def test_replay_writes_each_line_when_due_and_stamps_it() -> None:
    now = [100.0]
    written: list[str] = []

    def sleep(seconds: float) -> None:
        now[0] += seconds

    stamps = replay(
        ["a", "b", "c"], [0.0, 0.0, 1.5], written.append, lambda: now[0], sleep, lambda: now[0]
    )

    assert written == ["a", "b", "c"]
    assert stamps == [100.0, 100.0, 101.5]


def test_latency_table_times_only_the_alerts_with_a_rule() -> None:
    table = latency_table({"outage_in_progress": [2.0, 4.0], "duplicated": [None]})

    assert "| duplicated | 1 | 0 | – | – | – |" in table
    assert "| outage_in_progress | 2 | 2 | 2.0 | 4.0 | 4.0 |" in table


def test_the_gap_before_a_micro_batch_is_from_the_last_ones_end_to_its_own_start() -> None:
    # (ended, id, files, seconds): 0 ran 100–110, 1 ran 111.5–120, 2 ran 120.25–130
    batches = [(110.0, 0, 1, 10.0), (120.0, 1, 2, 8.5), (130.0, 2, 1, 9.75)]

    assert gaps_before(batches) == [None, 1.5, 0.25]
    assert gaps_before([]) == []
