"""`pulsar-audit ingest logs`: parser and handler (registered by ingest.cli.register)."""

from __future__ import annotations

import argparse

from pulsar_audit.cli import EXIT_OK, Context
from pulsar_audit.output import format_table


def cmd_ingest_logs(ctx: Context) -> int:
    from ingest.logs import ingest_logs

    args = ctx.args
    path = ctx.input_path()
    report = ingest_logs(ctx.lakehouse, path, args.source, args.host, ctx.progress(), args.tz)
    ctx.emit(report.as_dict(), _text)
    return EXIT_OK


def _text(result: dict) -> str:
    if result["files"] == 0:
        return f"nothing new: {result['skipped_files']} files already ingested, 0 rows added"
    columns = ["table", "files", "skipped_files", "lines", "entries", "parse_errors"]
    note = ""
    if result["timestamp_zone"]:
        note = f"\ntimestamps without an offset read as {result['timestamp_zone']}"
    return format_table([result], columns) + note


def add_logs_parser(kinds: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    logs = kinds.add_parser(
        "logs",
        parents=[common],
        help="load broker, bookie or client log files under PATH",
        description="Load Pulsar broker/bookie logs (log4j2 or BookKeeper layout) or client "
        "logs (Java: log4j2, logback, Spring Boot; C++/Python 2.x-4.x; Go: logrus) into "
        "bronze.<source>_log; each line's layout is recognised. Stack traces stay with their "
        "entry; other lines (application output) are kept as rows with parse_error 'not a log "
        "entry'. Files already ingested are skipped.",
    )
    logs.add_argument("path", metavar="PATH", help="a log file or a folder of them")
    logs.add_argument("--source", required=True, choices=["broker", "bookie", "client"])
    logs.add_argument("--host", help="host of every file (default: from each file's name)")
    logs.add_argument(
        "--tz",
        default="UTC",
        help="time zone of timestamps written without an offset (BookKeeper layout, C++ "
        "client, Java layouts without an offset), e.g. Europe/Berlin (default UTC)",
    )
    logs.set_defaults(handler=cmd_ingest_logs)
