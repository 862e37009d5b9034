"""`pulsar-audit quarantine list [RUN]`: the records ingest refused, with file, line and reason."""

from __future__ import annotations

import argparse
import os
from typing import Any

from jobs.context import EXIT_OK, Context
from pulsar_audit.output import format_table

RAW_WIDTH = 60
QUARANTINE_COLUMNS = ["file", "line", "reason", "raw"]


def shown_raw(raw: str | None, width: int = RAW_WIDTH) -> str:
    """A refused line as one printable line: control bytes as `?`, cut to `width` with `…`."""
    text = "".join(c if c.isprintable() else "?" for c in " ".join((raw or "").split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def shown_file(path: str) -> str:
    """The file relative to the current folder when it is under it (the paths are absolute)."""
    here = os.getcwd() + os.sep
    return path[len(here) :] if path.startswith(here) else path


def render_quarantine(result: dict[str, Any]) -> str:
    if not result["total"]:
        return "no record is quarantined" + (
            f" for run {result['run_id']}" if result["run_id"] else ""
        )
    rows = [
        {
            "file": shown_file(r["source_file"]),
            "line": r["line_number"],
            "reason": r["reason"],
            "raw": shown_raw(r["raw"]),
        }
        for r in result["rows"]
    ]
    head = f"{result['total']} quarantined record(s)"
    if len(rows) < result["total"]:
        head += f" (the first {len(rows)}; --limit shows more)"
    return f"{head}\n\n{format_table(rows, QUARANTINE_COLUMNS)}"


def cmd_quarantine_list(ctx: Context) -> int:
    from serve.quarantine import quarantine_rows

    run_id = ctx.args.run_id
    result = quarantine_rows(ctx.lakehouse, run_id, ctx.args.limit)
    ctx.emit({"run_id": run_id, **result}, render_quarantine)
    return EXIT_OK


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("quarantine", help="the records ingest refused (bronze.quarantine)")
    actions = p.add_subparsers(dest="quarantine_command", metavar="ACTION", required=True)
    q = actions.add_parser(
        "list",
        parents=[common],
        help="print the quarantined records: file, line, reason, raw text",
        description="Print the records that ingest refused, by file and line, with the reason "
        "and the start of the raw text. A record that could not be read at all has no run: "
        "it is listed only without RUN.",
    )
    q.add_argument("run_id", metavar="RUN", nargs="?", help="only the records of this run")
    q.add_argument("--limit", type=int, default=100, metavar="N", help="rows (default 100)")
    q.set_defaults(handler=cmd_quarantine_list)
