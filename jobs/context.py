"""What every command of the command line shares: its context (config, Spark session,
lakehouse, built on first use), the common options, `init`, dry runs, and running a command
with its exit code (0 ok; 1 anomalies found and --fail-on-anomaly given; 2 usage, config or
input error)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import cached_property
from typing import Any

from pulsar_audit import environment
from pulsar_audit.config import LAYERS as LAYER_NAMES
from pulsar_audit.config import Config, load_config
from pulsar_audit.errors import UsageError
from pulsar_audit.output import format_table, print_json
from pulsar_audit.quiet import quiet_libraries
from pulsar_audit.secrets import RedactingFilter, redact

EXIT_OK, EXIT_ANOMALIES, EXIT_USAGE = 0, 1, 2

log = logging.getLogger("pulsar_audit")


class Context:
    """What a command needs, built on first use: config, Spark session, lakehouse."""

    def __init__(self, args: argparse.Namespace):
        self.args = args

    def input_path(self) -> str:
        """The command's PATH argument (a local path or a URI: file:, dbfs:, s3a: …).

        A local path is checked before anything starts (Spark takes seconds); other file
        systems are checked when Spark lists them.
        """
        from pulsar_audit.storage import precheck_local

        path = self.args.path
        precheck_local(path)
        return path

    def progress(self) -> Callable[[str], None] | None:
        """A live status line on stderr when it is a terminal and the output is not JSON."""
        if getattr(self.args, "json", False) or not sys.stderr.isatty():
            return None
        from pulsar_audit.output import live_status

        return live_status()

    @cached_property
    def config(self) -> Config:
        args = self.args
        return load_config(
            getattr(args, "env", None),
            getattr(args, "lakehouse", None),
            master=getattr(args, "master", None),
            catalog=getattr(args, "catalog", None),
            schema_prefix=getattr(args, "schema_prefix", None),
        )

    @cached_property
    def spark(self):  # noqa: ANN201 - pyspark import is deferred so --help stays fast
        from pulsar_audit.spark import get_spark

        return get_spark(self.config)

    @cached_property
    def lakehouse(self):  # noqa: ANN201
        from pulsar_audit.delta_io import Lakehouse

        return Lakehouse(self.spark, self.config)

    @contextmanager
    def sized_for(self, path: str, checks: bool = True) -> Iterator[None]:
        """The session a job on the input `path` runs in, for the `with` block.

        When Spark is not started yet, a small local input gets the small-input session
        (pulsar_audit.spark.for_input), and GX's context (checks: the job validates with GX)
        is built while the JVM starts. When this process runs a session already (the warm
        server, jobs/server.py; a `shell` line after another), the job shares it: the input's
        settings that a running session takes apply inside the block only, so the questions
        and jobs after it see the session's own.
        Either way the ingest's own settings travel in `config.spark.ingest_conf`. A context
        whose session is built already keeps it as it is.
        """
        from checks.warm import warm_up_in_background
        from pulsar_audit.spark import (
            SMALL_INPUT_CONF,
            for_input,
            local_input_bytes,
            running_session,
            runtime_settings,
            session_settings,
        )

        if "spark" in vars(self):  # built on first use: here, already
            yield
            return
        sized = for_input(self.config, local_input_bytes(path))
        spark = running_session()
        if spark is None:
            self.config = sized
            if checks:
                warm_up_in_background()  # GX while the JVM starts (both take seconds)
            yield
            return
        # the running session as it is (not rebuilt from the config, which would set the
        # config's values on it); of the small-input settings, those it can take now and the
        # config does not set itself (the session holds the config's own already)
        self.spark = spark
        small = {k: v for k, v in SMALL_INPUT_CONF.items() if k not in self.config.spark.conf}
        settings = runtime_settings(small) if sized is not self.config else {}
        settings = {k: v for k, v in settings.items() if spark.conf.isModifiable(k)}
        own = replace(self.config.spark, ingest_conf=sized.spark.ingest_conf)
        self.config = replace(self.config, spark=own)
        with session_settings(spark, settings):
            yield

    @contextmanager
    def ingest_session(self, path: str, checks: bool) -> Iterator[None]:
        """`sized_for`, and inside it the ingest's own settings (`config.spark.ingest_conf`,
        e.g. generated code for a mid-sized small input): the session `analyze` gives the
        ingest of this input (jobs/ingest.py), for an `ingest` command."""
        from pulsar_audit.spark import session_settings

        with (
            self.sized_for(path, checks),
            session_settings(self.lakehouse.spark, self.config.spark.ingest_conf),
        ):
            yield

    def emit(self, result: Any, text: Callable[[Any], str]) -> None:
        if getattr(self.args, "json", False):
            print_json(result)
        else:
            print(text(result))


Handler = Callable[["Context"], int]


def common_options(json_output: bool = True) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--env", help="config env: conf/<ENV>.yaml (default $PULSAR_AUDIT_ENV or 'local')"
    )
    parent.add_argument("--lakehouse", metavar="DIR", help="local lakehouse root (overrides conf)")
    parent.add_argument(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (default $PULSAR_AUDIT_SPARK_MASTER or conf)",
    )
    parent.add_argument(
        "--catalog", metavar="NAME", help="catalog of the tables (storage 'catalog' envs)"
    )
    parent.add_argument(
        "--schema-prefix",
        metavar="PREFIX",
        help="tables in schemas PREFIX_bronze, PREFIX_silver, PREFIX_gold (storage 'catalog')",
    )
    parent.add_argument(
        "--dry-run",
        action="store_true",
        help="check the arguments and the config, print what would run; touch no data",
    )
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


def dry_run(ctx: Context) -> int:
    """The plan of a command: its arguments and where its tables are, checked, nothing run.

    What a scheduler's deployment check calls: the config loads (overrides applied), a local
    input path exists; no Spark session is started and no table or file is touched.
    """
    from pulsar_audit.schemas import TABLES
    from pulsar_audit.storage import precheck_local

    args, config = ctx.args, ctx.config
    if getattr(args, "path", None) is not None:
        precheck_local(str(args.path))
    ignored = {"handler", "json", "verbose", "dry_run", "env", "lakehouse", "master", "command"}
    ignored |= {"catalog", "schema_prefix", "kind", "alerts_command", "action"}
    arguments = {k: v for k, v in sorted(vars(args).items()) if k not in ignored}
    if config.storage == "path":
        where = {layer: str(config.lakehouse_path / layer) for layer in LAYER_NAMES}
    else:
        where = {layer: f"{config.catalog}.{config.schemas[layer]}" for layer in LAYER_NAMES}
    plan = {
        "dry_run": True,
        "command": _command_name(args),
        "arguments": arguments,
        "env": config.env,
        "storage": config.storage,
        "master": config.spark.master,
        "layers": where,
        "tables": len(TABLES),
    }
    ctx.emit(plan, _plan_text)
    return EXIT_OK


def _plan_text(plan: dict[str, Any]) -> str:
    arguments = " ".join(f"{k}={v}" for k, v in plan["arguments"].items() if v not in (None, []))
    layers = ", ".join(f"{layer} at {where}" for layer, where in plan["layers"].items())
    return (
        f"dry run of `{plan['command']}` ({arguments or 'no arguments'}): env {plan['env']}, "
        f"master {plan['master'] or '(the cluster session)'}, {layers}; nothing was run"
    )


def _command_name(args: argparse.Namespace) -> str:
    words = [args.command]
    for key in ("kind", "alerts_command", "action"):
        value = getattr(args, key, None)
        if isinstance(value, str):
            words.append(value)
    return " ".join(words)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """The core's own command: `init`."""
    p = sub.add_parser("init", parents=[common], help="create the lakehouse tables (idempotent)")
    p.set_defaults(handler=cmd_init)


def run(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse `argv`, set up logging, run the chosen handler; usage errors exit 2."""
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # -v is about pulsar-audit's stages: GX's own INFO lines (hundreds, at import) stay out,
    # and without it the libraries' warnings too (pulsar_audit/quiet.py)
    quiet_libraries(args.verbose)
    for log_handler in logging.getLogger().handlers:  # no secret reaches a log line
        log_handler.addFilter(RedactingFilter())
    handler: Handler = args.handler
    ctx = Context(args)
    try:
        if getattr(args, "dry_run", False):
            return dry_run(ctx)
        return handler(ctx)
    except UsageError as exc:
        print(f"pulsar-audit {args.command}: {redact(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # a full or read-only disk, a damaged table: said plainly
        problem = environment.describe(exc, _lakehouse_of(ctx))
        if problem is None:
            raise
        print(f"pulsar-audit {args.command}: {redact(problem)}", file=sys.stderr)
        return EXIT_USAGE


def _lakehouse_of(ctx: Context) -> str | None:
    """The local lakehouse the command used (if its config was loaded), for messages."""
    config = ctx.__dict__.get("config")  # set once `ctx.config` was first used
    if config is not None and config.storage == "path":
        return str(config.lakehouse_path)
    return getattr(ctx.args, "lakehouse", None)
