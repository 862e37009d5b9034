"""`pulsar-audit report RUN --out FILE.html`: one self-contained page that opens offline.

Plotly's JavaScript (its basic bundle, compressed) is embedded once; the page loads nothing
from anywhere else.
"""

from __future__ import annotations

import html
from datetime import datetime
from pathlib import Path
from typing import Any

from pulsar_audit.output import seq_range
from serve.report_data import report_data
from serve.report_figures import ledger_map_figure, timeline_figure
from serve.report_plotly import DONE, chart, plotly_loader

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
SUMMARY_COLUMNS = (
    "topic", "subscription", "subscription_type", "valid", "sent", "acked", "nacked",
    "received", "lost", "unseen", "duplicated", "redelivered", "out_of_order",
    "unacked_received", "outages",
)  # fmt: skip
# Long text of a summary row, shown in a row of its own under the counts, across the table.
SUMMARY_NOTES = ("reasons", "unchecked")
CONFIG_COLUMNS = (
    "ts", "topic", "ensemble_size", "write_quorum", "ack_quorum", "brokers", "bookies",
    "deduplication", "scenario",
)  # fmt: skip
CHECK_COLUMNS = ("table", "expectation", "column", "level", "success", "observed_value")
PROVISIONAL_COLUMNS = (
    "state", "kind", "run_id", "where", "seqs", "started_at", "first_seen_batch", "explanation",
)  # fmt: skip
STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
h1 { margin-bottom: 4px; } h2 { margin-top: 32px; }
.verdict { display: inline-block; padding: 4px 12px; border-radius: 4px; font-weight: bold; }
.v-true { background: #d4edda; } .v-false { background: #f8d7da; }
.v-unknown { background: #fff3cd; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; max-width: 100%; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td { overflow-wrap: break-word; }
@media (max-width: 1279px) { th { overflow-wrap: anywhere; } }
td.notes { color: #444; border-top: none; }
/* A notes row takes the table's width and never widens it. */
td.notes div { width: 0; min-width: 100%; }
th { background: #f2f2f2; } .muted { color: #666; }
"""


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, list):
        return "; ".join(_text(v) for v in value)
    return str(value)


def _breakable(text: str, after: str) -> str:
    return html.escape(text).replace(after, f"{after}<wbr>")


def _notes(row: dict[str, Any], notes: tuple[str, ...], span: int) -> str:
    said = [f"<b>{n}</b>: {html.escape(_text(row.get(n)))}" for n in notes if row.get(n)]
    if not said:
        return ""
    return f'<tr><td class="notes" colspan="{span}"><div>{"<br>".join(said)}</div></td></tr>'


def _table(
    rows: list[dict[str, Any]],
    columns: tuple[str, ...],
    notes: tuple[str, ...] = (),
    name: str = "",
) -> str:
    """An HTML table that wraps within the page; `notes`: long columns, each row's in a row of
    its own below it."""
    if not rows:
        return '<p class="muted">(none)</p>'
    # Headers may break after an underscore, cells after a slash (topics): the table fits.
    head = "".join(f"<th>{_breakable(c, '_')}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{_breakable(_text(r.get(c)), '/')}</td>" for c in columns)
        + "</tr>"
        + _notes(r, notes, len(columns))
        for r in rows
    )
    table_id = f' id="{name}"' if name else ""
    return f"<table{table_id}><tr>{head}</tr>{body}</table>"


def overall_verdict(summary: list[dict[str, Any]]) -> str:
    """false if any subscription is false, else unknown if any is unknown (or none), else true."""
    verdicts = {row["valid"] for row in summary}
    if "false" in verdicts:
        return "false"
    if "unknown" in verdicts or not verdicts:
        return "unknown"
    return "true"


def _causes(causes: list[dict[str, Any]]) -> str:
    return "; ".join(c["reason"] for c in causes or [] if c.get("reason"))


def findings_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [
        {
            "kind": "outage",
            "where": f"producer {o['producer']}",
            "when": o["start"],
            "explanation": o["explanation"],
            "probable causes": _causes(o["causes"]),
        }
        for o in data["outages"]
    ]
    rows += [
        {
            "kind": a["kind"],
            "where": f"subscription {a['subscription']}, producer {a['producer']}",
            "when": a["first_ts"],
            "explanation": a["explanation"],
            "probable causes": _causes(a["causes"]),
        }
        for a in data["anomalies"]
    ]
    return rows


def provisional_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """gold.provisional's rows of the run as the report lists them."""
    rows = []
    for p in data["provisional"]:
        where = f"producer {p['producer']}, partition {p['partition']}"
        if p["subscription"] is not None:
            where = f"subscription {p['subscription']}, {where}"
        rows.append({**p, "where": where, "seqs": seq_range(p)})
    return rows


def _provisional_section(data: dict[str, Any]) -> str:
    """What a watch has raised about the run (none: no section): before the run is
    reconciled, the only findings there are."""
    rows = provisional_rows(data)
    if not rows:
        return ""
    return f"""<h2>Provisional findings</h2>
<p class="muted">Raised by <code>pulsar-audit watch</code> while the run was written (trace
clock): <b>open</b> until the run is reconciled, then <b>confirmed</b> by a finding below or
<b>withdrawn</b>.</p>
{_table(rows, PROVISIONAL_COLUMNS, name="provisional")}"""


def render_html(data: dict[str, Any]) -> str:
    """The report page for one run's `report_data`."""
    verdict = overall_verdict(data["summary"])
    window = data["window"]
    timeline = chart(timeline_figure(data), "chart-timeline", PLOTLY_CONFIG)
    ledger_map = chart(ledger_map_figure(data["ledger_map"]), "chart-ledger-map", PLOTLY_CONFIG)
    run = html.escape(data["run_id"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>pulsar-audit: run {run}</title><style>{STYLE}</style>
{plotly_loader()}</head>
<body>
<h1>Run {run}</h1>
<p>verdict <span class="verdict v-{verdict}" id="verdict">valid: {verdict}</span>
<span class="muted">{_text(window.start)} .. {_text(window.end)} (client clock);
{len(data["outages"])} outage(s), {len(data["anomalies"])} anomaly block(s)</span></p>
{_table(data["summary"], SUMMARY_COLUMNS, SUMMARY_NOTES, "summary")}
{_provisional_section(data)}
<h2>Latency and rates over time</h2>
<p class="muted">Red bands: outages (messages in flight, none completed). Vertical lines:
unloads (violet), ownership, broker or bookie loss, ledger rolls.</p>
{timeline}
<h2>Anomalies by ledger and entry</h2>
<p class="muted">Where lost, duplicated, out-of-order, redelivered and poll-skipped messages
were stored (a lost message at its ack's position).</p>
{ledger_map}
<h2>Findings</h2>
{_table(findings_rows(data), ("kind", "where", "when", "explanation", "probable causes"))}
<h2>Configuration</h2>
{_table(data["config"], CONFIG_COLUMNS)}
<h2>Checks</h2>
{_table(data["checks"], CHECK_COLUMNS)}
{DONE}
</body></html>
"""


def write_report(read: Any, run_id: str, out: str | Path) -> dict[str, Any]:
    """Write the report of `run_id` to `out`; read: table name → DataFrame."""
    data = report_data(read, run_id)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return {
        "run_id": run_id,
        "out": str(path),
        "bytes": path.stat().st_size,
        "verdict": overall_verdict(data["summary"]),
        "points": len(data["series"]),
        "slice_ms": data["slice_ms"],
        "outages": len(data["outages"]),
        "markers": len(data["markers"]),
        "ledger_cells": len(data["ledger_map"]),
        "provisional": len(data["provisional"]),
    }
