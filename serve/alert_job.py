"""The alerts job: read gold → raise new alerts (insert on dedup key) → deliver pending ones.

Delivery state lives in gold.alerts, one entry per sink, written back by MERGE on the dedup
key after each sink: a re-run sends nothing twice, and what a down sink missed stays pending.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.config import Config, SinkConfig
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import ALERTS
from serve.alerts import candidate_alerts
from serve.sinks import (
    PENDING,
    REJECTED,
    SENT,
    Delivery,
    deliver_file,
    deliver_pulsar,
    deliver_webhook,
    file_path,
)

log = logging.getLogger(__name__)

DONE_STATES = (SENT, REJECTED)


def raise_alerts(lakehouse: Lakehouse, config: Config) -> int:
    """Insert an alert for every finding that matters and has none yet; return how many."""
    before = lakehouse.read("alerts").count()
    candidates = candidate_alerts(
        lakehouse.read("run_summary"),
        lakehouse.read("anomalies"),
        lakehouse.read("outages"),
        lakehouse.read("config_risk"),
        lakehouse.read("run_events"),
        config.alerts,
    )
    lakehouse.insert_new("alerts", candidates)
    raised = lakehouse.read("alerts").count() - before
    log.info("alerts: %d raised, %d in all", raised, before + raised)
    return raised


def is_done(alert: dict[str, Any], sink: str) -> bool:
    """The alert (a row of gold.alerts as a dict) was delivered to, or refused for good by,
    `sink`."""
    return any(d["sink"] == sink and d["state"] in DONE_STATES for d in alert["deliveries"])


def all_alerts(lakehouse: Lakehouse) -> list[dict[str, Any]]:
    """gold.alerts as dicts (alerts are findings: a short list)."""
    return [row.asDict(recursive=True) for row in lakehouse.read("alerts").collect()]


def pending_at(alerts: list[dict[str, Any]], sink: str) -> list[dict[str, Any]]:
    """The `alerts` not yet done at `sink`, oldest first (created_at, then first_ts with
    nulls first, then dedup_key: the order a table read sorted by them gives)."""
    pending = [alert for alert in alerts if not is_done(alert, sink)]
    return sorted(
        pending,
        key=lambda a: (
            a["created_at"],
            a["first_ts"] is not None,
            a["first_ts"] or a["created_at"],
            a["dedup_key"],
        ),
    )


def _deliver(config: Config, sink: SinkConfig, alerts: list[dict[str, Any]]) -> list[Delivery]:
    if sink.pulsar is not None:
        return deliver_pulsar(sink.name, sink.pulsar, alerts)
    if sink.webhook is not None:
        return deliver_webhook(sink.name, sink.webhook, alerts)
    return deliver_file(sink.name, file_path(sink.file, config), alerts)


def _merged_deliveries(alert: dict[str, Any], outcome: Delivery) -> list[dict[str, Any]]:
    """The alert's deliveries with this sink's entry replaced; attempts add up across runs."""
    previous = [d for d in alert["deliveries"] if d["sink"] == outcome.sink]
    entry = outcome.as_row()
    if previous:
        entry["attempts"] += previous[0]["attempts"] or 0
        entry["last_attempt_at"] = entry["last_attempt_at"] or previous[0]["last_attempt_at"]
    others = [d for d in alert["deliveries"] if d["sink"] != outcome.sink]
    return sorted([*others, entry], key=lambda d: d["sink"])


def _record(lakehouse: Lakehouse, alerts: list[dict[str, Any]], outcomes: list[Delivery]) -> None:
    schema = T.StructType([ALERTS["dedup_key"], ALERTS["deliveries"]])
    rows = [
        (alert["dedup_key"], _merged_deliveries(alert, outcome))
        for alert, outcome in zip(alerts, outcomes, strict=True)
    ]
    updates = local_frame(lakehouse.spark, rows, schema)
    lakehouse.update_changed("alerts", updates, ["deliveries"])


def send_alerts(
    lakehouse: Lakehouse, config: Config, alerts: list[dict[str, Any]] | None = None
) -> dict[str, dict[str, int]]:
    """Deliver every alert still pending at each configured sink; per sink, count outcomes.
    alerts: gold.alerts as the caller has just read it and raised into it (`all_alerts`),
    for the first sink; each other sink reads the table as the sinks before it left it."""
    report: dict[str, dict[str, int]] = {}
    for index, sink in enumerate(config.alerts.sinks):
        if alerts is None or index > 0:
            alerts = all_alerts(lakehouse)
        pending = pending_at(alerts, sink.name)
        outcomes = _deliver(config, sink, pending)
        if pending:
            _record(lakehouse, pending, outcomes)
        counts = {state: 0 for state in (SENT, PENDING, REJECTED)}
        for outcome in outcomes:
            counts[outcome.state] += 1
        report[sink.name] = counts
        log.info("alert sink %s (%s): %s", sink.name, sink.kind, counts)
    return report


def raise_and_send(lakehouse: Lakehouse, config: Config) -> dict[str, Any]:
    """The `alerts send` job (and the end of `analyze` when sinks are configured)."""
    raised = raise_alerts(lakehouse, config)
    return {"raised": raised, "sinks": send_alerts(lakehouse, config)}


def alert_rows(
    lakehouse: Lakehouse,
    run_ids: list[str] | None = None,
    pending_only: bool = False,
    config: Config | None = None,
) -> list[dict[str, Any]]:
    """gold.alerts as dicts, newest first; pending_only: not yet done at some configured sink."""
    df = lakehouse.read("alerts")
    if run_ids:
        df = df.filter(F.col("run_id").isin(run_ids))
    ordered = df.orderBy(F.col("created_at").desc(), "run_id", "kind", "dedup_key")
    rows = [row.asDict(recursive=True) for row in ordered.collect()]
    if pending_only and config is not None and config.alerts.sinks:
        sinks = [sink.name for sink in config.alerts.sinks]
        rows = [row for row in rows if not all(is_done(row, sink) for sink in sinks)]
    return rows
