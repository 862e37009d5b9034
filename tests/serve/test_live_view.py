"""serve/live_view.py on tiny literal frames and rows: the per-run rates and finding counts `watch`
shows after a micro-batch, and their rendering (a rich table, a line of text)."""

from __future__ import annotations

import io
from datetime import datetime, timedelta

from pyspark.sql import Row
from rich.console import Console

from serve.live_view import (
    batch_rates,
    batch_text,
    changed_findings,
    finding_counts,
    last_alerts,
    render_view,
    run_rows,
)

T0 = datetime(2026, 11, 26, 12, 0, 0)
EVENTS = "run_id string, event string, ts timestamp"
FINDINGS = ("run_id", "kind", "state", "subscription", "producer", "seq_from", "seq_to",
            "first_seen_batch", "closed_batch", "explanation", "causes",
            "causes_batch")  # fmt: skip
UNLOAD = Row(event_type="bundle_unload_started", ts=T0, host="broker-1",
             reason="unloaded 10 ms before it began")  # fmt: skip


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _rates(spark, producer: list[tuple], consumer: list[tuple]) -> list[tuple]:  # noqa: ANN001
    rows = batch_rates(
        spark.createDataFrame(producer, EVENTS), spark.createDataFrame(consumer, EVENTS)
    )
    return sorted(tuple(r) for r in rows.collect())


def test_no_events_no_rates(spark) -> None:
    assert _rates(spark, [], []) == []


def test_rates_count_sends_and_deliveries_over_the_trace_time_the_events_span(spark) -> None:
    producer = [("r1", "send", _at(0)), ("r1", "ack", _at(0.5)), ("r1", "send", _at(1)),
                ("r1", "send", _at(2)), ("r2", "send", _at(5))]  # fmt: skip
    consumer = [("r1", "receive", _at(1.5)), ("r1", "receive", _at(2)), ("r1", "end", _at(4))]
    # r1: 3 sends, 2 deliveries over 0 → 4 s; r2: one event, no span, so no rate
    assert _rates(spark, producer, consumer) == [
        ("r1", 3, 2, 0.8, 0.5),
        ("r2", 1, 0, None, None),
    ]


def _findings(rows: list[tuple]) -> list[Row]:
    # the confirmed suspected loss of r3 has its causes ranked (in micro-batch 1), the others
    # none yet
    full = [(*row, "why", *(([UNLOAD], 1) if row[0] == "r3" else (None, None))) for row in rows]
    return [Row(**dict(zip(FINDINGS, row, strict=True))) for row in full]


FOUND = [
    ("r1", "outage_in_progress", "open", None, "p1", None, None, 0, None),
    ("r1", "suspected_loss", "open", "s1", "p1", 3, 4, 1, None),
    ("r1", "suspected_loss", "withdrawn", "s1", "p1", 7, 7, 0, 1),
    ("r1", "out_of_order", "open", "s1", "p1", 9, 9, 1, None),
    ("r3", "suspected_loss", "confirmed", "s1", "p1", 1, 1, 0, 1),
]


def test_run_rows_put_rates_beside_finding_counts_zero_without_findings() -> None:
    rates = [
        {"run_id": "r1", "sends_per_s": 10.0, "deliveries_per_s": 9.0},
        {"run_id": "r2", "sends_per_s": 5.0, "deliveries_per_s": None},
        {"run_id": "r9", "sends_per_s": 1.0, "deliveries_per_s": 1.0},  # not watched
    ]
    counts = finding_counts(_findings(FOUND))
    rows = [tuple(r.values()) for r in run_rows(rates, counts, ["r1", "r2", "r3", "r4"])]
    assert rows == [
        ("r1", 10.0, 9.0, 1, 1, 1, 0, 1),  # open outage, open suspicion, open out_of_order
        ("r2", 5.0, None, 0, 0, 0, 0, 0),  # no finding
        ("r3", None, None, 0, 0, 0, 1, 0),  # no event in this micro-batch
    ]  # r4: neither events nor findings, not shown


def test_changed_findings_are_those_a_micro_batch_opened_or_settled() -> None:
    assert changed_findings(_findings([]), 1) == []
    rows = changed_findings(_findings(FOUND), 1)
    assert sorted((r["kind"], r["seq_from"], r["state"], r["first_cause"]) for r in rows) == [
        ("out_of_order", 9, "open", None),
        ("suspected_loss", 1, "confirmed", "bundle_unload_started"),
        ("suspected_loss", 3, "open", None),
        ("suspected_loss", 7, "withdrawn", None),
    ]
    assert changed_findings(_findings(FOUND), 2) == []


def test_last_alerts_are_the_newest_first_whether_some_sink_has_them() -> None:
    sent, pending = Row(sink="hook", state="sent"), Row(sink="hook", state="pending")
    alerts = [
        Row(kind=f"k{i % 2}", run_id="r1", title=f"t{i}", created_at=_at(i), deliveries=d)
        for i, d in enumerate([[sent], [pending], None, [], [pending, sent], [sent], [pending]])
    ]
    shown = last_alerts(alerts)
    assert [(a["title"], a["sent"]) for a in shown] == [
        ("t6", False), ("t5", True), ("t4", True), ("t3", False), ("t2", None)
    ]  # fmt: skip
    tie = [Row(kind=k, run_id="r1", title=k, created_at=_at(0), deliveries=[]) for k in "ba"]
    assert [a["kind"] for a in last_alerts(tie)] == ["a", "b"]


VIEW = {
    "micro_batch": 4,
    "files": 2,
    "runs": [
        {
            "run_id": "r1",
            "sends_per_s": 812.0,
            "deliveries_per_s": None,
            "open_outages": 1,
            "suspected_losses": 2,
            "other_open": 0,
            "confirmed": 0,
            "withdrawn": 1,
        },
    ],  # fmt: skip
    "findings": [
        {
            "kind": "suspected_loss",
            "run_id": "r1",
            "subscription": "s1",
            "producer": "p1",
            "seq_from": 3,
            "seq_to": 4,
            "state": "open",
        },
        {
            "kind": "outage_in_progress",
            "run_id": "r1",
            "subscription": None,
            "producer": "p1",
            "seq_from": None,
            "seq_to": None,
            "state": "confirmed",
            "first_cause": "bundle_unload_started",
        },
    ],  # fmt: skip
    "alerts": [
        {
            "kind": "suspected_loss",
            "run_id": "r1",
            "title": "acked messages missing",
            "created_at": _at(3),
            "sent": True,
        },
    ],  # fmt: skip
}


def test_batch_text_is_a_line_per_run_and_per_finding() -> None:
    assert batch_text(VIEW) == (
        "micro-batch 4: 2 file(s)\n"
        "  run r1: 812.0 sends/s, – deliveries/s; open outages 1, suspected losses 2\n"
        "  suspected_loss open: run r1 sub s1 producer p1 seq 3–4\n"
        "  outage_in_progress confirmed: run r1 producer p1 (first cause bundle_unload_started)"
    )


def _rendered(view: dict) -> str:
    console = Console(record=True, width=160, color_system=None, file=io.StringIO())
    console.print(render_view(view))
    return console.export_text()


def test_render_view_shows_the_runs_the_findings_and_the_last_alerts() -> None:
    text = _rendered(VIEW)
    assert "pulsar-audit watch · micro-batch 4 (2 file(s))" in text
    [row] = [line for line in text.splitlines() if "r1" in line and "812.0" in line]
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells == ["r1", "812.0", "–", "1", "2", "0", "0", "1"]
    assert "suspected_loss open: run r1 sub s1 producer p1 seq 3–4" in text
    assert "acked messages missing" in text and "True" in text


def test_render_view_of_an_empty_micro_batch_is_the_table_alone() -> None:
    empty = {"micro_batch": 0, "files": 0, "runs": [], "findings": [], "alerts": []}
    text = _rendered(empty)
    assert "micro-batch 0 (0 file(s))" in text
    assert "this micro-batch" not in text and "last alerts" not in text
