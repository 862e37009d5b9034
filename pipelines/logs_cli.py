"""`pulsar-audit logs unmatched`: what in the ingested logs no pattern recognizes."""

from __future__ import annotations

import argparse
from typing import Any

from pulsar_audit.cli import EXIT_OK, Context
from pulsar_audit.output import format_table

SOURCES = ["broker", "bookie", "client"]
EXAMPLE_WIDTH = 100


def cmd_logs_unmatched(ctx: Context) -> int:
    from pipelines.unmatched import unmatched_report

    args = ctx.args
    result = unmatched_report(ctx.lakehouse, args.source or None, args.top)
    ctx.emit(result, render_unmatched)
    return EXIT_OK


def render_unmatched(result: dict[str, Any]) -> str:
    from pipelines.recognition import describe_recognition

    head = "\n".join(describe_recognition(row) for row in result["sources"]) or "no log lines"
    rows = [{**t, "example": t["example"][:EXAMPLE_WIDTH]} for t in result["templates"]]
    table = format_table(rows, ["source", "count", "template", "example"])
    return f"{head}\n\nunmatched templates\n{table}"


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
    p.add_argument("--source", action="append", choices=SOURCES, help="only this source")
    p.add_argument("--top", type=int, default=20, metavar="N", help="templates per source")
    p.set_defaults(handler=cmd_logs_unmatched)
