"""What `watch` shows after each micro-batch (issue 29): per run, the messages/s in (sends) and
out (deliveries) of the micro-batch's events, its open outages and suspected losses, the
findings the micro-batch opened or settled, and the last alerts.

The micro-batch's rates are computed by its fold, beside the live state (jobs/live_state.py);
Spark aggregates what the watch wrote of the findings (gold.provisional, gold.alerts) into small
frames, collected in one job; only those come to the driver. The
rendering is a pure function of them: a rich table on a terminal (`render_view`), one line per
micro-batch otherwise (`batch_text`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from rich.console import Group
from rich.table import Table

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.local_frames import local_frame
from pulsar_audit.packed import collected, pack

OPEN, CONFIRMED, WITHDRAWN = "open", "confirmed", "withdrawn"
RUN_COLUMNS = ("run_id", "sends_per_s", "deliveries_per_s", "open_outages", "suspected_losses",
               "other_open", "confirmed", "withdrawn")  # fmt: skip
FINDING_COLUMNS = ("kind", "run_id", "subscription", "producer", "seq_from", "seq_to", "state")
ALERT_COLUMNS = ("kind", "run_id", "title", "created_at", "sent")
LAST_ALERTS = 5
# `batch_rates`' rows
RATES = "run_id string, sends long, deliveries long, sends_per_s double, deliveries_per_s double"


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


def finding_counts(provisional: DataFrame) -> DataFrame:
    """Per run: open outages, open suspected losses, other open findings, and the findings
    confirmed and withdrawn so far."""
    is_open = F.col("state") == OPEN
    is_outage = F.col("kind") == "outage_in_progress"
    is_suspicion = F.col("kind") == "suspected_loss"

    def count(condition: Column, name: str) -> Column:
        return F.sum(condition.cast("long")).alias(name)

    return provisional.groupBy("run_id").agg(
        count(is_open & is_outage, "open_outages"),
        count(is_open & is_suspicion, "suspected_losses"),
        count(is_open & ~is_outage & ~is_suspicion, "other_open"),
        count(F.col("state") == CONFIRMED, "confirmed"),
        count(F.col("state") == WITHDRAWN, "withdrawn"),
    )


def run_rows(rates: DataFrame, counts: DataFrame) -> DataFrame:
    """One row per run of either frame: its rates (none if the micro-batch had no events of
    it) beside its finding counts (0 without findings)."""
    joined = rates.join(counts, on="run_id", how="full")
    zero = [F.coalesce(F.col(c), F.lit(0)).alias(c) for c in RUN_COLUMNS[3:]]
    return joined.select("run_id", "sends_per_s", "deliveries_per_s", *zero)


def changed_findings(provisional: DataFrame, batch_id: int) -> DataFrame:
    """The findings a micro-batch opened, settled or gave new causes, with their state and
    first cause."""
    in_batch = (
        (F.col("first_seen_batch") == batch_id)
        | (F.col("closed_batch") == batch_id)
        | (F.col("causes_batch") == batch_id)
    )
    first = F.try_element_at("causes", F.lit(1))
    return provisional.filter(in_batch).select(
        *FINDING_COLUMNS, "explanation", first["event_type"].alias("first_cause")
    )


def read_view(
    lakehouse: Lakehouse, batch_id: int, files: int, runs: list[str], rates: list[Row]
) -> dict[str, Any]:
    """The micro-batch's view: `runs` (one dict per run of `runs`, the runs watched so far,
    with the micro-batch's `rates`, `batch_rates` rows the fold computed beside the state),
    `findings` (opened or settled by it), `alerts` (the last ones of `runs`): what the watch
    wrote of them, in one Spark job (the three parts packed, pulsar_audit/packed.py)."""
    rated = local_frame(lakehouse.spark, rates, RATES)
    provisional = lakehouse.read("provisional").filter(F.col("run_id").isin(runs))
    rows = run_rows(rated, finding_counts(provisional)).filter(F.col("run_id").isin(runs))
    alerts = (
        lakehouse.read("alerts")
        .filter(F.col("run_id").isin(runs))
        .select(*ALERT_COLUMNS[:-1], F.exists("deliveries", lambda d: d["state"] == "sent"))
        .toDF(*ALERT_COLUMNS)
        .orderBy(F.col("created_at").desc(), "kind")
        .limit(LAST_ALERTS)
    )
    parts = {"runs": rows, "findings": changed_findings(provisional, batch_id), "alerts": alerts}
    found = collected(pack(parts), list(parts))
    latest = sorted(found["alerts"], key=lambda a: a["kind"])
    latest.sort(key=lambda a: a["created_at"], reverse=True)
    return {
        "micro_batch": batch_id,
        "files": files,
        "runs": sorted((r.asDict() for r in found["runs"]), key=lambda r: r["run_id"]),
        "findings": [r.asDict() for r in found["findings"]],
        "alerts": [r.asDict() for r in latest],
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
