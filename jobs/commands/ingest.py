"""`pulsar-audit ingest traces|logs|zk`: outside data into bronze."""

from __future__ import annotations

import argparse

from jobs.context import EXIT_OK, Context
from pulsar_audit.output import format_table


def cmd_ingest_traces(ctx: Context) -> int:
    from jobs.ingest import ingest_traces

    path = ctx.input_path()
    with ctx.ingest_session(path, checks=True):  # the session analyze gives this ingest
        report = ingest_traces(ctx.lakehouse, path, ctx.progress())
    result = report.as_dict()
    ctx.emit(result, _ingest_text)
    return EXIT_OK


def _ingest_text(result: dict) -> str:
    if result["files"] == 0:
        return f"nothing new: {result['skipped_files']} files already ingested, 0 rows added"
    table = format_table([result], ["files", "skipped_files", "records", "accepted", "quarantined"])
    return f"{table}\nruns: {', '.join(result['runs']) or '(none)'}"


def cmd_ingest_logs(ctx: Context) -> int:
    from ingest.logs import ingest_logs

    args = ctx.args
    path = ctx.input_path()
    with ctx.ingest_session(path, checks=False):  # the session analyze gives this ingest
        report = ingest_logs(ctx.lakehouse, path, args.source, args.host, ctx.progress(), args.tz)
    ctx.emit(report.as_dict(), _logs_text)
    return EXIT_OK


def _logs_text(result: dict) -> str:
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


def cmd_ingest_zk(ctx: Context) -> int:
    from ingest.zk_ingest import ingest_zk

    path = ctx.input_path()
    with ctx.ingest_session(path, checks=False):  # the session analyze gives this ingest
        report = ingest_zk(ctx.lakehouse, path, ctx.progress())
    ctx.emit(
        report.as_dict(),
        lambda r: format_table(
            [r], ["files", "skipped_files", "records", "accepted", "quarantined"]
        ),
    )
    return EXIT_OK


def add_zk_ingest_parser(
    kinds: argparse._SubParsersAction, common: argparse.ArgumentParser
) -> None:
    zk = kinds.add_parser(
        "zk",
        parents=[common],
        help="load ZooKeeper capture files or dumps (JSONL) under PATH",
        description="Load `pulsar-audit zk capture` / `zk dump` files into bronze.zk_changes; "
        "malformed rows go to bronze.quarantine. Files already ingested are skipped.",
    )
    zk.add_argument("path", metavar="PATH", help="a capture file or a folder of them")
    zk.set_defaults(handler=cmd_ingest_zk)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    ingest = sub.add_parser("ingest", help="load outside data into bronze tables")
    kinds = ingest.add_subparsers(dest="kind", metavar="KIND", required=True)
    traces = kinds.add_parser(
        "traces",
        parents=[common],
        help="load trace files (JSONL, optionally gzip, or Parquet) under PATH",
        description="Load every new trace file (*.jsonl, *.jsonl.gz, *.parquet) under PATH "
        "into bronze; refused records go to bronze.quarantine with the reason. Files already "
        "ingested (same path and content) are skipped.",
    )
    traces.add_argument("path", metavar="PATH", help="a trace file or a folder of them")
    traces.set_defaults(handler=cmd_ingest_traces)
    add_logs_parser(kinds, common)
    add_zk_ingest_parser(kinds, common)
