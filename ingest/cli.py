"""`pulsar-audit ingest ...` subcommands."""

from __future__ import annotations

import argparse

from pulsar_audit.cli import EXIT_OK, Context
from pulsar_audit.output import format_table


def cmd_ingest_traces(ctx: Context) -> int:
    from ingest.traces import ingest_traces

    path = ctx.input_path()
    report = ingest_traces(ctx.lakehouse, path, ctx.progress())
    result = report.as_dict()
    ctx.emit(result, _ingest_text)
    return EXIT_OK


def _ingest_text(result: dict) -> str:
    if result["files"] == 0:
        return f"nothing new: {result['skipped_files']} files already ingested, 0 rows added"
    table = format_table([result], ["files", "skipped_files", "records", "accepted", "quarantined"])
    return f"{table}\nruns: {', '.join(result['runs']) or '(none)'}"


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

    from ingest import zk_cli
    from ingest.log_cli import add_logs_parser

    add_logs_parser(kinds, common)
    zk_cli.add_zk_ingest_parser(kinds, common)
    zk_cli.register(sub, common)  # `pulsar-audit zk capture|dump`
