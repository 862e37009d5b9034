"""`pulsar-audit alerts send|list`, `message`, `sql`, `report`, `logs unmatched`: what people
downstream use."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.commands.analyze import event_text
from jobs.context import EXIT_OK, Context
from pulsar_audit.output import format_table
from serve.overlaps import overlap_note, with_overlaps

ALERT_COLUMNS = ["key", "severity", "kind", "run_id", "title", "sinks"]
SQL_LIMIT = 100
LOG_SOURCES = ["broker", "bookie", "client"]
EXAMPLE_WIDTH = 100


def no_sink_note(env: str) -> str:
    """What an empty alerts.sinks means, and where to set one."""
    return (
        f"no alert sink is configured (alerts.sinks in conf/{env}.yaml is empty): `analyze` "
        "raises no alerts and `alerts send` delivers none; add a pulsar, webhook or file sink"
    )


def _sink_states(alert: dict[str, Any]) -> str:
    return ", ".join(f"{d['sink']}={d['state']}" for d in alert["deliveries"]) or "-"


def render_alerts(result: dict[str, Any]) -> str:
    parts = []
    if "sinks" in result:
        parts.append(f"raised {result['raised']} new alert(s)")
        per_sink = [{"sink": name, **counts} for name, counts in result["sinks"].items()]
        parts.append(format_table(per_sink) if per_sink else "no alert sink configured")
    if "alerts" in result:
        rows = [
            {**a, "key": a["dedup_key"][:12], "sinks": _sink_states(a)} for a in result["alerts"]
        ]
        parts.append(format_table(rows, ALERT_COLUMNS))
    return "\n\n".join(parts)


def cmd_alerts_send(ctx: Context) -> int:
    from serve.alert_job import raise_and_send

    ctx.emit(raise_and_send(ctx.lakehouse, ctx.config), render_alerts)
    return EXIT_OK


def cmd_alerts_list(ctx: Context) -> int:
    from serve.alert_job import alert_rows

    config = ctx.config
    rows = alert_rows(ctx.lakehouse, ctx.args.run, ctx.args.pending, config)

    def text(result: dict[str, Any]) -> str:
        listed = render_alerts(result) if result["alerts"] else "no alerts in gold.alerts"
        return listed if config.alerts.sinks else f"{listed}\n{no_sink_note(config.env)}"

    ctx.emit({"alerts": rows}, text)
    return EXIT_OK


def _where(event: dict[str, Any]) -> str:
    if event.get("ledger_id") is None:
        return ""
    return f" at {event['ledger_id']}:{event['entry_id']}:{event.get('batch_index')}"


def render_message(result: dict[str, Any]) -> str:
    """The message's life as one time-ordered list, then its findings."""
    key, history = result["message"], result["history"]
    head = (
        f"message seq {key['seq']} of producer {key['producer']} on {key['topic']} "
        f"(partition {key['partition']}), run {key['run_id']}"
    )
    if result["as_of"]["at"] is not None:
        head += (
            f"\nas of {result['as_of']['at'].isoformat()}: versions {result['as_of']['versions']}"
        )
    state = "acked" if history["acked"] else "nacked" if history["nacked"] else "never completed"
    head += f"\n{state}"
    if history["ack_latency_ms"] is not None:
        head += f" after {history['ack_latency_ms']:.1f} ms"
    head += f"; stored {len(history['copies'])} time(s)"
    if history.get("key") is not None:
        head += f"; key {history['key']}"
    lines = []
    for e in result["producer_events"]:
        what = e["event"] + _where(e) + (f" error={e['error']}" if e["error"] else "")
        lines.append({"ts": e["ts"], "who": f"producer {key['producer']}", "what": what})
    for d in result["deliveries"]:
        what = f"receive #{d['delivery_index']}{_where(d)} redelivery_count={d['redelivery_count']}"
        kind = f" ({d['subscription_type']})" if d.get("subscription_type") else ""
        who = f"{d['subscription']}{kind}/{d['consumer']}"
        lines.append({"ts": d["ts"], "who": who, "what": what})
    for i in result["infra_events"]:
        lines.append(
            {
                "ts": i["corrected_ts"],
                "who": f"{i['source']} {i['host']} ({i['clock']})",
                "what": f"{i['event_type']} {event_text(i, i['detail'])}",
            }
        )
    lines.sort(key=lambda line: line["ts"])
    found = "\n".join(
        f"- {f['kind']} {f['id'][:12]}: {f['explanation']}"
        + "".join(f"\n    cause: {c['reason']}" for c in f.get("causes") or [])
        + (f"\n    {overlap_note(f)}" if overlap_note(f) else "")
        for f in result["findings"]
    )
    return (
        f"{head}\n\n{format_table(lines, ['ts', 'who', 'what'])}\n\nfindings\n{found or '(none)'}"
    )


def cmd_message(ctx: Context) -> int:
    from serve.forensics import message_life
    from serve.snapshot import Snapshot, parse_as_of

    args = ctx.args
    snapshot = Snapshot(ctx.lakehouse, parse_as_of(ctx.lakehouse, args.as_of))
    result = message_life(snapshot, args.run_id, args.seq, args.producer, args.topic)
    ctx.emit({**result, "findings": with_overlaps(result["findings"])}, render_message)
    return EXIT_OK


def cmd_sql(ctx: Context) -> int:
    from serve.sql import run_sql

    result = run_sql(ctx.lakehouse, ctx.args.query, ctx.args.limit)

    def text(r: dict[str, Any]) -> str:
        table = format_table(r["rows"], r["columns"])
        return table + (f"\n(first {ctx.args.limit} rows)" if r["truncated"] else "")

    ctx.emit(result, text)
    return EXIT_OK


def cmd_report(ctx: Context) -> int:
    from serve.report import write_report
    from serve.summary import json_verdict

    result = write_report(ctx.lakehouse.read, ctx.args.run_id, ctx.args.out)
    verdict = result["verdict"]  # gold's text; --json gives true / false / "unknown"
    ctx.emit(
        {**result, "verdict": json_verdict(verdict)},
        lambda r: f"wrote {r['out']} ({r['bytes']} bytes, verdict {verdict})",
    )
    return EXIT_OK


def cmd_logs_unmatched(ctx: Context) -> int:
    from serve.unmatched import unmatched_report

    args = ctx.args
    result = unmatched_report(ctx.lakehouse, args.source or None, args.top)
    ctx.emit(result, render_unmatched)
    return EXIT_OK


def render_unmatched(result: dict[str, Any]) -> str:
    from serve.recognition import describe_recognition

    head = "\n".join(describe_recognition(row) for row in result["sources"]) or "no log lines"
    rows = [{**t, "example": t["example"][:EXAMPLE_WIDTH]} for t in result["templates"]]
    table = format_table(rows, ["source", "count", "template", "example"])
    return f"{head}\n\nunmatched templates\n{table}"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("alerts", help="raise, send and list alerts (gold.alerts)")
    alerts = p.add_subparsers(dest="alerts_command", metavar="ACTION", required=True)
    q = alerts.add_parser(
        "send",
        parents=[common],
        help="raise alerts for new findings and deliver every pending one",
        description="Insert an alert into gold.alerts for every finding that matters and has "
        "none yet, then deliver the alerts still pending at each sink of conf alerts.sinks.",
    )
    q.set_defaults(handler=cmd_alerts_send)
    q = alerts.add_parser("list", parents=[common], help="print gold.alerts and their states")
    q.add_argument("--run", action="append", metavar="RUN_ID", help="only this run (repeatable)")
    q.add_argument(
        "--pending", action="store_true", help="only alerts not yet done at a configured sink"
    )
    q.set_defaults(handler=cmd_alerts_list)

    p = sub.add_parser(
        "message",
        parents=[common],
        help="the whole life of one message",
        description="Print send, retries, ack or nack, every delivery, the findings holding "
        "the message and the infrastructure events around it (corrected clock).",
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--seq", type=int, required=True, metavar="N")
    p.add_argument("--producer", metavar="P", help="needed when several producers used seq N")
    p.add_argument("--topic", metavar="T", help="needed when several topics have seq N")
    p.add_argument(
        "--as-of",
        metavar="VERSION|TIMESTAMP",
        help="answer from the tables as they were: a version of gold.anomalies, or an ISO "
        "8601 timestamp (UTC when no offset)",
    )
    p.set_defaults(handler=cmd_message)

    p = sub.add_parser(
        "sql",
        parents=[common],
        help="run a Spark SQL query over the tables (bronze.*, silver.*, gold.*)",
        description="Run QUERY with every table registered by its layer name, e.g. "
        "bronze.producer_events, silver.delivery, gold.anomalies.",
    )
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--limit", type=int, default=SQL_LIMIT, help="rows to print (default 100)")
    p.set_defaults(handler=cmd_sql)

    p = sub.add_parser(
        "report",
        parents=[common],
        help="write a self-contained HTML report of one run",
        description="Write one HTML file (Plotly embedded, opens offline, ~0.6 MB): verdict and "
        "counts, latency and rates over time slices sized to the run with outage bands and "
        "infrastructure events, anomalies by ledger and entry, the findings, the run's config "
        "and checks.",
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--out", required=True, metavar="FILE.html")
    p.set_defaults(handler=cmd_report)


def register_logs(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    logs = sub.add_parser("logs", help="what pulsar-audit understands of the ingested logs")
    actions = logs.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser(
        "unmatched",
        parents=[common],
        help="the log lines no pattern recognizes, as templates with counts",
        description="Group the ingested log lines that match no known message (and the lines "
        "that are no log entry) into templates (Drain3), with a count and an example each, "
        "after the recognized-line counts per source.",
    )
    p.add_argument("--source", action="append", choices=LOG_SOURCES, help="only this source")
    p.add_argument("--top", type=int, default=20, metavar="N", help="templates per source")
    p.set_defaults(handler=cmd_logs_unmatched)
