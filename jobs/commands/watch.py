"""`pulsar-audit watch PATH`: provisional findings while a run is still being written."""

from __future__ import annotations

import argparse
import hashlib
from typing import Any

from jobs.context import EXIT_OK, Context
from pulsar_audit.output import format_table

COLUMNS = ["kind", "run_id", "subscription", "producer", "seqs", "first_seen_batch", "state"]


def default_checkpoint(ctx: Context, path: str) -> str:
    """<lakehouse>/_watch/<hash of PATH>: one checkpoint per landing folder and lakehouse."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    return str(ctx.config.lakehouse_path / "_watch" / digest)


def cmd_watch(ctx: Context) -> int:
    from jobs.live import WatchOptions, watch

    args = ctx.args
    path = ctx.input_path()
    options = WatchOptions(
        checkpoint=args.checkpoint or default_checkpoint(ctx, path),
        once=args.once,
        until_idle_s=args.until_idle,
        trigger_s=args.trigger_s,
        max_files=args.max_files,
        final=args.final,
    )
    result = watch(ctx.lakehouse, ctx.config, path, options, ctx.progress())
    ctx.emit(result, render)
    return EXIT_OK


def render(result: dict[str, Any]) -> str:
    rows = [
        {
            **row,
            "seqs": "" if row["seq_from"] is None else f"{row['seq_from']}–{row['seq_to']}",
        }
        for row in result["provisional"]
    ]
    head = f"{result['batches']} micro-batch(es), {result['files']} trace file(s)"
    sinks = "".join(f"\nalerts {name}: {counts}" for name, counts in result["alerts"].items())
    return f"{head}\nprovisional findings\n{format_table(rows, COLUMNS)}{sinks}"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "watch",
        parents=[common],
        help="watch a landing folder: provisional findings and alerts while a run is written",
        description="A Spark Structured Streaming job over the trace files appearing under "
        "PATH (JSONL and .parquet; each file is read once, when it appears: write a file "
        "whole, then move it in). Each micro-batch goes through the same ingest, checks and "
        "pipeline as analyze; the runs it touched are judged for provisional findings "
        "(gold.provisional: suspected_loss, outage_in_progress, duplicated, out_of_order), "
        "each sent once to the alert sinks. A run whose consumers all ended is reconciled: "
        "each finding confirmed by a batch finding or withdrawn. On leaving, analyze runs on "
        "PATH and reconciles the ended runs. docs/live.md.",
    )
    p.add_argument("path", metavar="PATH", help="the landing folder of a capture")
    p.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="the stream's checkpoint (default: <lakehouse>/_watch/<hash of PATH>); a watch "
        "restarted on it goes on after the files already handed out",
    )
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--once", action="store_true", help="process the files there now, then leave")
    stop.add_argument(
        "--until-idle",
        type=float,
        metavar="S",
        help="leave after S seconds without a new file (default: watch until interrupted)",
    )
    p.add_argument(
        "--trigger-s", type=float, default=2.0, metavar="N", help="seconds between micro-batches"
    )
    p.add_argument(
        "--max-files", type=int, default=100, metavar="N", help="files per micro-batch at most"
    )
    p.add_argument(
        "--final",
        action="store_true",
        help="on leaving, reconcile every run (the capture is over), not only the ended ones",
    )
    p.set_defaults(handler=cmd_watch)
