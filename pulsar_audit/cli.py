"""`pulsar-audit` command line: one subcommand per job, --help on each, --json for machines.

Exit codes: 0 ok; 1 anomalies found and --fail-on-anomaly given; 2 usage, config or input error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from functools import cached_property
from typing import Any

from pulsar_audit.config import Config, load_config
from pulsar_audit.errors import UsageError
from pulsar_audit.output import format_table, print_json

EXIT_OK, EXIT_ANOMALIES, EXIT_USAGE = 0, 1, 2

log = logging.getLogger("pulsar_audit")


class Context:
    """What a command needs, built on first use: config, Spark session, lakehouse."""

    def __init__(self, args: argparse.Namespace):
        self.args = args

    @cached_property
    def config(self) -> Config:
        return load_config(getattr(self.args, "env", None), getattr(self.args, "lakehouse", None))

    @cached_property
    def spark(self):  # noqa: ANN201 - pyspark import is deferred so --help stays fast
        from pulsar_audit.spark import get_spark

        return get_spark(self.config)

    @cached_property
    def lakehouse(self):  # noqa: ANN201
        from pulsar_audit.delta_io import Lakehouse

        return Lakehouse(self.spark, self.config)

    def emit(self, result: Any, text: Callable[[Any], str]) -> None:
        if getattr(self.args, "json", False):
            print_json(result)
        else:
            print(text(result))


Handler = Callable[[Context], int]


def _common(json_output: bool = True) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--env", help="config env: conf/<ENV>.yaml (default $PULSAR_AUDIT_ENV or 'local')"
    )
    parent.add_argument("--lakehouse", metavar="DIR", help="local lakehouse root (overrides conf)")
    if json_output:
        parent.add_argument("--json", action="store_true", help="print one JSON object")
    parent.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    return parent


# --------------------------------------------------------------------------- commands


def cmd_init(ctx: Context) -> int:
    """Create every contract table that does not exist (idempotent)."""
    report = ctx.lakehouse.create_all()
    ctx.emit(
        {"env": ctx.config.env, "tables": report},
        lambda r: format_table(r["tables"], ["table", "created", "location"]),
    )
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pulsar-audit",
        description="Trace-replay anomaly detector for Apache Pulsar (PySpark on Delta Lake).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _common()

    p = sub.add_parser("init", parents=[common], help="create the lakehouse tables (idempotent)")
    p.set_defaults(handler=cmd_init)

    for register in _stage_commands():
        register(sub, common)
    return parser


def _stage_commands() -> list[Callable[..., None]]:
    """Each stage adds its own subcommands (kept out of this module to keep it small)."""
    from ingest import cli as ingest_cli
    from ingest.pulsar import cli as pulsar_cli
    from ingest.simulate import cli as simulate_cli
    from pipelines import cli as pipelines_cli

    return [ingest_cli.register, pipelines_cli.register, pulsar_cli.register, simulate_cli.register]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    handler: Handler = args.handler
    try:
        return handler(Context(args))
    except UsageError as exc:
        print(f"pulsar-audit {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
