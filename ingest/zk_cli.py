"""`pulsar-audit zk capture|dump` (no Spark) and `pulsar-audit ingest zk` (into bronze)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from pulsar_audit.cli import EXIT_OK, Context
from pulsar_audit.output import format_table


def cmd_zk_capture(ctx: Context) -> int:
    from ingest.zk_capture import ZkCapture

    args = ctx.args
    capture = ZkCapture(args.zookeeper, args.out, roots=tuple(args.root or ()) or _roots())
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rows = capture.run(args.duration, stop)
    result = {"out": str(args.out), "rows": rows, "resyncs": capture.resyncs}
    ctx.emit(result, lambda r: f"{r['rows']} rows written to {r['out']} ({r['resyncs']} resyncs)")
    return EXIT_OK


def cmd_zk_dump(ctx: Context) -> int:
    from ingest.zk_capture import dump

    args = ctx.args
    rows = dump(args.zookeeper, args.out, tuple(args.root or ()) or _roots())
    ctx.emit(
        {"out": str(args.out), "rows": rows}, lambda r: f"{r['rows']} snapshot rows in {r['out']}"
    )
    return EXIT_OK


def cmd_ingest_zk(ctx: Context) -> int:
    from ingest.zk_ingest import ingest_zk

    path = ctx.input_path()
    report = ingest_zk(ctx.lakehouse, path, ctx.progress())
    ctx.emit(
        report.as_dict(),
        lambda r: format_table(
            [r], ["files", "skipped_files", "records", "accepted", "quarantined"]
        ),
    )
    return EXIT_OK


def _roots() -> tuple[str, ...]:
    from ingest.zk_capture import DEFAULT_ROOTS

    return DEFAULT_ROOTS


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
    zk = sub.add_parser("zk", help="watch or dump Pulsar's metadata in ZooKeeper (no Spark)")
    actions = zk.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, handler, text in (
        ("capture", cmd_zk_capture, "record every create/change/delete until --duration ends"),
        ("dump", cmd_zk_dump, "write the current tree as snapshot rows (a saved dump)"),
    ):
        p = actions.add_parser(name, parents=[common], help=text, description=text)
        p.add_argument("--zookeeper", required=True, metavar="HOST:PORT", help="connect string")
        p.add_argument("--out", required=True, metavar="FILE", help="JSONL file (appended to)")
        p.add_argument(
            "--root",
            action="append",
            help="path to watch (repeatable; default: "
            "/namespace /managed-ledgers /ledgers /admin/policies /loadbalance/brokers)",
        )
        if name == "capture":
            p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
        p.set_defaults(handler=handler)


if __name__ == "__main__":  # pragma: no cover - `python -m ingest.zk_cli zk capture ...`
    from pulsar_audit.cli import common_options

    parser = argparse.ArgumentParser(prog="pulsar-audit")
    register(parser.add_subparsers(dest="command", required=True), common_options())
    parsed = parser.parse_args()
    sys.exit(parsed.handler(Context(parsed)))
