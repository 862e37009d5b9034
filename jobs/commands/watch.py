"""`pulsar-audit watch PATH`: provisional findings while a run is still being written."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import signal
import sys
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobs.context import EXIT_OK, Context
from pulsar_audit.config import Config
from pulsar_audit.output import format_table, seq_range

if TYPE_CHECKING:  # the watch's modules load Spark: imported when it runs
    from jobs.live import AfterBatch
    from jobs.live_state import Judged

log = logging.getLogger(__name__)

COLUMNS = [
    "kind", "run_id", "subscription", "producer", "seqs", "first_seen_batch", "state",
    "first_cause",
]  # fmt: skip


def default_checkpoint(ctx: Context, path: str) -> str:
    """<lakehouse>/_watch/<hash of PATH>: one checkpoint per landing folder and lakehouse."""
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    return str(ctx.config.lakehouse_path / "_watch" / digest)


def cmd_watch(ctx: Context) -> int:
    from checks.warm import warm_up_in_background
    from jobs.live import WatchOptions, watch

    args = ctx.args
    path = ctx.input_path()
    warm_up_in_background()  # GX while the JVM starts (both take seconds)
    stop = threading.Event()  # SIGTERM: leave (analyze, reconcile) once no micro-batch runs
    if threading.current_thread() is threading.main_thread():  # only there can it be caught
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    options = WatchOptions(
        checkpoint=args.checkpoint or default_checkpoint(ctx, path),
        once=args.once,
        until_idle_s=args.until_idle,
        trigger_s=args.trigger_s,
        max_files=args.max_files,
        final=args.final,
        stop=stop,
    )
    config = watch_config(ctx.config, args)
    viewing = args.view or (sys.stdout.isatty() and not args.json)
    with _BatchDisplay(ctx, viewing) as after_batch:
        progress = None if viewing else ctx.progress()
        result = watch(ctx.lakehouse, config, path, options, progress, after_batch)
    ctx.emit(result, render)
    return EXIT_OK


def watch_config(config: Config, args: argparse.Namespace) -> Config:
    """The config the watch runs with: `--no-warm-up` turns its warm-up off."""
    if args.no_warm_up:
        return replace(config, watch=replace(config.watch, warm_up=False))
    return config


class _BatchDisplay:
    """What the watch shows after each micro-batch: a rich live table (viewing), else a line
    on stderr (JSON with --json: a capture beside it reads them), so stdout keeps the
    result alone."""

    def __init__(self, ctx: Context, viewing: bool):
        self.ctx, self.viewing = ctx, viewing
        self.live = None
        self.runs: set[str] = set()
        self.tables: Any = None  # serve.live_view.ViewTables: what it read, kept while current

    def __enter__(self) -> AfterBatch:
        if self.viewing:
            from rich.live import Live

            self.live = Live(auto_refresh=False, transient=False)
            self.live.start()
        return self.show

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
            if not self.live.console.is_terminal:  # rich ends the table's line on a terminal only
                self.live.console.line()

    def show(self, batch_id: int, paths: list[str], judged: Judged) -> None:
        from serve.live_view import ViewTables, batch_text, read_view, render_view

        self.runs.update(judged.runs)
        self.tables = self.tables or ViewTables()
        try:
            lakehouse, runs = self.ctx.lakehouse, sorted(self.runs)
            view = read_view(lakehouse, batch_id, len(paths), runs, judged.rates, self.tables)
        except Exception:  # noqa: BLE001 - showing a micro-batch must never fail it
            log.warning("micro-batch %d: the view could not be read", batch_id, exc_info=True)
            return
        if self.live is not None:
            self.live.update(render_view(view), refresh=True)
        elif self.ctx.args.json:
            sys.stderr.write(json.dumps(view, default=str) + "\n")
        else:
            sys.stderr.write(batch_text(view) + "\n")
        sys.stderr.flush()


def _first_cause(row: dict[str, Any]) -> str | None:
    causes = row.get("causes")  # rows (a watch's result) or dicts (its JSON read back)
    return causes[0]["event_type"] if causes else None


def render(result: dict[str, Any]) -> str:
    rows = [
        {**row, "seqs": seq_range(row), "first_cause": _first_cause(row)}
        for row in result["provisional"]
    ]
    head = f"{result['batches']} micro-batch(es), {result['files']} input file(s)"
    sinks = "".join(f"\nalerts {name}: {counts}" for name, counts in result["alerts"].items())
    return f"{head}\nprovisional findings\n{format_table(rows, COLUMNS)}{sinks}"


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "watch",
        parents=[common],
        help="watch a landing folder: provisional findings and alerts while a run is written",
        description="A Spark Structured Streaming job over the trace files appearing under "
        "PATH (JSONL and .parquet; each file is read once, when it appears: write a file "
        "whole, then move it in). Each micro-batch goes through the same ingest and row checks "
        "as analyze (a run's table checks and pipeline wait for its end); the runs it touched "
        "are judged from the live state for provisional findings "
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
    p.add_argument(
        "--no-warm-up",
        action="store_true",
        help="start the query at once, cold: by default a watch on an empty folder first runs "
        "its micro-batches over a made-up run in a scratch lakehouse (about 40 s here), so that "
        "the run's first ones are fast (config watch.warm_up)",
    )
    p.add_argument(
        "--view",
        action="store_true",
        help="a live table refreshed per micro-batch (rates in and out per run, open outages, "
        "suspected losses, last alerts); the default on a terminal without --json. Otherwise "
        "a line (a JSON object with --json) per micro-batch on stderr",
    )
    p.set_defaults(handler=cmd_watch)
