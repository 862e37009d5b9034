"""`pulsar-audit server start|stop|status` (the warm server of a lakehouse, jobs/server.py)
and `pulsar-audit shell` (one session, many questions, jobs/shell.py)."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.context import EXIT_OK, EXIT_USAGE, Context, common_options
from jobs.server_control import DEFAULT_IDLE_TIMEOUT_S, server_status, start_server, stop_server
from jobs.warm import MODE_VARIABLE
from pulsar_audit.config import Config


def status_text(status: dict[str, Any]) -> str:
    if status.get("stopping"):
        done = "stopped" if status.get("stopped") else "asked to stop (still running)"
        if not status.get("stopped") and status.get("busy"):
            done = f"asked to stop once its job `{status['busy']}` is done (still running)"
        return f"{done} the server of {status['lakehouse']} (pid {status['pid']}, " + (
            f"{status['questions']} question(s) in {status['uptime_s']} s)"
        )
    if not status["running"]:
        log = "\n".join(status.get("log") or [])
        return f"no server runs for {status['lakehouse']}" + (f"\n{log}" if log else "")
    head = "a server already runs" if status.get("already") else "server"
    if status.get("already") is False:
        head = f"started a server in {status['start_s']} s"
    return (
        f"{head} for {status['lakehouse']}: pid {status['pid']}, env {status['env']}, "
        f"up {status['uptime_s']} s (ready in {status['ready_s']} s), "
        f"{status['questions']} question(s), idle {status['idle_s']} s of "
        f"{status['idle_timeout_s']:g} s, socket {status['socket']}"
    ) + (f"; busy with `{status['busy']}`" if status.get("busy") else "")


def _local_config(ctx: Context) -> Config:
    from pulsar_audit.errors import UsageError

    if ctx.config.storage != "path":
        raise UsageError(
            f"env {ctx.config.env!r} keeps its tables in a catalog: the warm server serves a "
            "local lakehouse (on Databricks the cluster is the warm session)"
        )
    return ctx.config


def cmd_start(ctx: Context) -> int:
    status = start_server(ctx.args, _local_config(ctx), ctx.args.idle_timeout)
    ctx.emit(status, status_text)
    return EXIT_OK if status["running"] else EXIT_USAGE


def cmd_stop(ctx: Context) -> int:
    ctx.emit(stop_server(_local_config(ctx)), status_text)
    return EXIT_OK


def cmd_status(ctx: Context) -> int:
    ctx.emit(server_status(_local_config(ctx)), status_text)
    return EXIT_OK


def cmd_shell(ctx: Context) -> int:
    from jobs.shell import repl

    return repl(ctx)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "server",
        help="a warm Spark session that answers questions in about a second",
        description="A long-lived local process that holds one Spark session for the "
        "lakehouse and answers the question commands (message, explain, sql, summary, "
        "alerts list, report, runs, quarantine, logs unmatched) of every `pulsar-audit` "
        "call while it runs, over a Unix socket in the lakehouse folder. "
        f"{MODE_VARIABLE}=off makes calls answer cold; {MODE_VARIABLE}=auto starts "
        "a server on the first question (unset: only when stderr is a terminal).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser("start", parents=[common], help="start the lakehouse's server")
    q.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="S",
        help=f"stop after S seconds without a question (default {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    q.set_defaults(handler=cmd_start)
    q = actions.add_parser("stop", parents=[common], help="stop the lakehouse's server")
    q.set_defaults(handler=cmd_stop)
    q = actions.add_parser("status", parents=[common], help="is a server running, since when")
    q.set_defaults(handler=cmd_status)

    p = sub.add_parser(
        "shell",
        parents=[common_options(json_output=False)],  # each line takes its own --json
        help="ask many questions in one session, with history",
        description='Read commands (`sql "…"`, `message RUN --seq N`, `summary` …) one a '
        "line and answer each in one Spark session (the lakehouse's server when one runs); "
        "the options given to `shell` apply to every line. History in "
        "$PULSAR_AUDIT_HISTORY (default ~/.pulsar_audit_history). `exit` or Ctrl-D ends it.",
    )
    p.set_defaults(handler=cmd_shell)
