"""What `watch` shows after each micro-batch (issue 29): per run, the messages/s in (sends) and
out (deliveries) of the micro-batch's events, its open outages and suspected losses, the
findings the micro-batch opened or settled, and the last alerts.

The micro-batch's rates are computed by its fold, beside the live state (jobs/live_state.py).
What the watch wrote of the findings and alerts (gold.provisional, gold.alerts: short lists)
comes to the driver as rows, read again only when the table has moved on since the last
micro-batch read it (pulsar_audit/kept_rows.py: most micro-batches write neither, and a read
of a Delta table costs a Spark job and its planning), and is counted there. The rendering is
a pure function of the view: a rich table on a terminal (`render_view`), one line per
micro-batch otherwise (`batch_text`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from rich.console import Group
from rich.table import Table

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.kept_rows import KeptRows

OPEN, CONFIRMED, WITHDRAWN = "open", "confirmed", "withdrawn"
RUN_COLUMNS = ("run_id", "sends_per_s", "deliveries_per_s", "open_outages", "suspected_losses",
               "other_open", "confirmed", "withdrawn")  # fmt: skip
FINDING_COLUMNS = ("kind", "run_id", "subscription", "producer", "seq_from", "seq_to", "state")
ALERT_COLUMNS = ("kind", "run_id", "title", "created_at", "sent")
LAST_ALERTS = 5
# `batch_rates`' rows
RATE_FIELDS = ("run_id", "sends", "deliveries", "sends_per_s", "deliveries_per_s")


def _rate(count: str) -> Column:
    """count / the trace seconds the micro-batch's events of the run span (none over 0 s)."""
    span_s = F.col("last_ts").cast("double") - F.col("first_ts").cast("double")
    return F.when(span_s > 0, F.round(F.col(count) / span_s, 1)).alias(f"{count}_per_s")


def batch_rates(producer_events: DataFrame, consumer_events: DataFrame) -> DataFrame:
    """Per run: sends and deliveries among the given events (a micro-batch's) and their rates
    over the trace time those events span."""
    is_send = (F.col("event") == "send").cast("long")
    is_delivery = (F.col("event") == "receive").cast("long")
    events = producer_events.select(
        "run_id", "ts", is_send.alias("sends"), F.lit(0).cast("long").alias("deliveries")
    ).unionByName(
        consumer_events.select(
            "run_id", "ts", F.lit(0).cast("long").alias("sends"), is_delivery.alias("deliveries")
        )
    )
    counted = events.groupBy("run_id").agg(
        F.sum("sends").alias("sends"),
        F.sum("deliveries").alias("deliveries"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
    )
    return counted.select("run_id", "sends", "deliveries", _rate("sends"), _rate("deliveries"))


def finding_counts(findings: list[Row]) -> dict[str, dict[str, int]]:
    """Per run of `findings` (gold.provisional rows): open outages, open suspected losses,
    other open findings, and the findings confirmed and withdrawn so far."""
    counts: dict[str, dict[str, int]] = {}
    for finding in findings:
        run = counts.setdefault(finding["run_id"], dict.fromkeys(RUN_COLUMNS[3:], 0))
        state, kind = finding["state"], finding["kind"]
        if state == OPEN:
            column = {"outage_in_progress": "open_outages", "suspected_loss": "suspected_losses"}
            run[column.get(kind, "other_open")] += 1
        elif state in (CONFIRMED, WITHDRAWN):
            run[state] += 1
    return counts


def run_rows(
    rates: list[dict[str, Any]], counts: dict[str, dict[str, int]], runs: list[str]
) -> list[dict[str, Any]]:
    """One row per run of `runs` that the micro-batch's `rates` (`batch_rates` rows) or the
    `counts` (`finding_counts`) hold, by run: its rates (none if the micro-batch had no
    events of it) beside its finding counts (0 without findings)."""
    rated = {rate["run_id"]: rate for rate in rates}
    zero = dict.fromkeys(RUN_COLUMNS[3:], 0)
    return [
        {
            "run_id": run,
            "sends_per_s": rated.get(run, {}).get("sends_per_s"),
            "deliveries_per_s": rated.get(run, {}).get("deliveries_per_s"),
            **counts.get(run, zero),
        }
        for run in sorted((set(rated) | set(counts)) & set(runs))
    ]


def changed_findings(findings: list[Row], batch_id: int) -> list[dict[str, Any]]:
    """The findings a micro-batch opened, settled or gave new causes (of `findings`,
    gold.provisional rows, in their order), with their state and first cause."""
    changed = []
    for finding in findings:
        if batch_id in (finding["first_seen_batch"], finding["closed_batch"],
                        finding["causes_batch"]):  # fmt: skip
            causes = finding["causes"]
            changed.append(
                {
                    **{c: finding[c] for c in FINDING_COLUMNS},
                    "explanation": finding["explanation"],
                    "first_cause": causes[0]["event_type"] if causes else None,
                }
            )
    return changed


def last_alerts(alerts: list[Row]) -> list[dict[str, Any]]:
    """The LAST_ALERTS newest of `alerts` (gold.alerts rows), newest first (then by kind):
    kind, run, title, when raised and whether some sink has it (None: no delivery recorded)."""
    shown = [
        {
            **{c: alert[c] for c in ALERT_COLUMNS[:-1]},
            "sent": None
            if alert["deliveries"] is None
            else any(d["state"] == "sent" for d in alert["deliveries"]),
        }
        for alert in alerts
    ]
    shown.sort(key=lambda a: a["kind"])
    shown.sort(key=lambda a: a["created_at"], reverse=True)
    return shown[:LAST_ALERTS]


@dataclass
class ViewTables:
    """What the view reads of gold.provisional and gold.alerts, kept from one micro-batch to
    the next while neither table has moved on (most micro-batches write neither:
    pulsar_audit/kept_rows.py)."""

    findings: KeptRows = field(default_factory=lambda: KeptRows("provisional"))
    alerts: KeptRows = field(default_factory=lambda: KeptRows("alerts"))


def read_view(
    lakehouse: Lakehouse,
    batch_id: int,
    files: int,
    runs: list[str],
    rates: list[Row],
    tables: ViewTables | None = None,
) -> dict[str, Any]:
    """The micro-batch's view: `runs` (one dict per run of `runs`, the runs watched so far,
    with the micro-batch's `rates`, `batch_rates` rows the fold computed beside the state),
    `findings` (opened or settled by it), `alerts` (the last ones of `runs`): from what the
    watch wrote of them (findings and alerts: short lists), read again only when their table
    has moved on since `tables` last read it."""
    tables = tables or ViewTables()
    findings = tables.findings.of(lakehouse, runs)
    rated = [rate.asDict() if isinstance(rate, Row) else dict(zip(RATE_FIELDS, rate, strict=True))
             for rate in rates]  # fmt: skip
    return {
        "micro_batch": batch_id,
        "files": files,
        "runs": run_rows(rated, finding_counts(findings), runs),
        "findings": changed_findings(findings, batch_id),
        "alerts": last_alerts(tables.alerts.of(lakehouse, runs)),
    }


# ------------------------------------------------------------------ rendering (pure)


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _seqs(finding: dict[str, Any]) -> str:
    if finding.get("seq_from") is None:
        return ""
    return f" seq {finding['seq_from']}–{finding['seq_to']}"


def finding_text(finding: dict[str, Any]) -> str:
    """'suspected_loss open: run r1 sub s producer p seq 3–4', and its first cause if any."""
    where = " ".join(
        f"{name} {finding[key]}"
        for name, key in (("run", "run_id"), ("sub", "subscription"), ("producer", "producer"))
        if finding.get(key)
    )
    cause = f" (first cause {finding['first_cause']})" if finding.get("first_cause") else ""
    return f"{finding['kind']} {finding['state']}: {where}{_seqs(finding)}{cause}"


def batch_text(view: dict[str, Any]) -> str:
    """One micro-batch as lines of text (a log, a capture's terminal)."""
    head = f"micro-batch {view['micro_batch']}: {view['files']} file(s)"
    lines = [head]
    for run in view["runs"]:
        lines.append(
            f"  run {run['run_id']}: {_number(run['sends_per_s'])} sends/s, "
            f"{_number(run['deliveries_per_s'])} deliveries/s; open outages "
            f"{run['open_outages']}, suspected losses {run['suspected_losses']}"
        )
    lines += [f"  {finding_text(finding)}" for finding in view["findings"]]
    return "\n".join(lines)


def render_view(view: dict[str, Any]) -> Group:
    """The live view of a micro-batch (`read_view`): its runs, the findings it opened or
    settled and the last alerts, as rich tables."""
    table = Table(
        title=f"pulsar-audit watch · micro-batch {view['micro_batch']} ({view['files']} file(s))"
    )
    for header in ("run", "sends/s", "deliveries/s", "open outages", "suspected losses",
                   "other open", "confirmed", "withdrawn"):  # fmt: skip
        table.add_column(header, justify="left" if header == "run" else "right")
    for run in view["runs"]:
        loud = "bold red" if run["open_outages"] or run["suspected_losses"] else None
        cells = [_number(run[c]) for c in RUN_COLUMNS[1:3]]
        counts = [str(run[c]) for c in RUN_COLUMNS[3:]]
        table.add_row(run["run_id"], *cells, *counts, style=loud)
    parts: list[Any] = [table]
    if view["findings"]:
        found = Table(title="this micro-batch", show_header=False)
        found.add_column("finding")
        for finding in view["findings"]:
            found.add_row(finding_text(finding))
        parts.append(found)
    if view["alerts"]:
        alerts = Table(title="last alerts")
        for column in ALERT_COLUMNS:
            alerts.add_column(column)
        for alert in view["alerts"]:
            alerts.add_row(*(str(alert[c]) for c in ALERT_COLUMNS))
        parts.append(alerts)
    return Group(*parts)
