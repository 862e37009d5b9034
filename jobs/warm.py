"""Warm answers, the client side: a question (`sql`, `message`, `explain` …) goes to the
lakehouse's running `pulsar-audit server` over a Unix socket and its output comes back as it
is printed, with the command's exit code; without a server the CLI answers cold, in-process.
`analyze` goes there too when a server runs (jobs/analyze.py:analyze_path: in its session,
with the input's settings for that job only).

No pyspark here: a question answered by the server costs this process its Python start and
the parse of its options, not a JVM (docs/performance.md, "Warm answers").

PULSAR_AUDIT_SERVER: `off` never uses a server; `auto` starts one on the first question or
`analyze` when none runs; unset, a running server is used and one is started for a question
only when stderr is a terminal (an SRE at a prompt), so that tests, CI and scripts never leave
a daemon behind.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from jobs.server_link import config_identity, connect, replies, send, socket_path
from pulsar_audit.config import Config
from pulsar_audit.errors import ConfigError

MODE_VARIABLE = "PULSAR_AUDIT_SERVER"
# The commands that only read the lakehouse: answered by the server when one runs.
QUESTIONS = {
    "message",
    "explain",
    "sql",
    "summary",
    "report",
    "runs",
    "compare",
    "quarantine",
    ("alerts", "list"),
    ("logs", "unmatched"),
}


# The jobs a running server also does (in its session, one at a time, in a thread while it
# answers `status`); none of them starts a server, but with `auto`: a lone job pays the same
# start either way. A job that sends alerts (sinks configured) runs cold: the sinks' secrets
# come from the caller's environment, which the server does not have.
JOBS = {"analyze"}


def _command(argv: list[str]) -> list[str]:
    """The first two words of `argv` (the command and its subcommand, if any), or none for a
    call the server never takes (help, a dry run)."""
    if any(a in ("-h", "--help", "--dry-run") for a in argv):
        return []
    return [a for a in argv if not a.startswith("-")][:2]


def is_question(argv: list[str]) -> bool:
    """Whether `argv` asks a question the server may answer (not help, not a dry run)."""
    words = _command(argv)
    return bool(words) and (words[0] in QUESTIONS or tuple(words) in QUESTIONS)


def is_job(argv: list[str]) -> bool:
    """Whether `argv` runs a job a running server may do (not help, not a dry run)."""
    words = _command(argv)
    return bool(words) and words[0] in JOBS


def question_config(argv: list[str]) -> Config | None:
    """The config a question would run with (its --env, --lakehouse … options), or None
    when there is none or it does not load (the cold path then says why)."""
    from jobs import context

    options = argparse.ArgumentParser(
        add_help=False, parents=[context.common_options()], exit_on_error=False
    )
    try:  # a malformed option is the real parser's to report
        known, _ = options.parse_known_args(argv)
        return context.Context(known).config
    except (argparse.ArgumentError, ConfigError):
        return None


def answer_from_server(argv: list[str], autostart: bool | None = None) -> int | None:
    """Ask the lakehouse's server to answer `argv`; its exit code, or None when no server
    answers it (none runs, another config, not a question): then answer cold."""
    mode = os.environ.get(MODE_VARIABLE, "")
    question = is_question(argv)
    if mode == "off" or not (question or is_job(argv)):
        return None
    config = question_config(argv)
    if config is None or config.storage != "path":
        return None
    if not question and config.alerts.sinks:
        # a job that sends alerts runs with the caller's environment (its tokens, secrets)
        return None
    path = socket_path(config.lakehouse_path)
    if not path.exists():
        if autostart is None:
            autostart = mode == "auto" or (mode == "" and question and sys.stderr.isatty())
        if not autostart or not _start_for(argv, config):
            return None
    request = {"argv": argv, "cwd": os.getcwd(), "identity": config_identity(config)}
    try:
        return _ask(path, request)
    except (ConnectionRefusedError, FileNotFoundError):  # a server that died: answer cold
        return None


def _start_for(argv: list[str], config: Config) -> bool:
    from jobs import context
    from jobs.server_control import start_server

    print(
        f"pulsar-audit: starting a warm server for {config.lakehouse_path} "
        f"(`pulsar-audit server stop` ends it; {MODE_VARIABLE}=off answers cold)",
        file=sys.stderr,
    )
    known, _ = context.common_options().parse_known_args(argv)
    return start_server(known, config)["running"]


def _ask(path: Path, request: dict[str, Any]) -> int | None:
    """Send one question; copy the server's output to ours as it comes; its exit code."""
    with connect(path) as conn:
        send(conn, request)
        for reply in replies(conn):
            if "out" in reply:
                sys.stdout.write(reply["out"])
                sys.stdout.flush()
            elif "err" in reply:
                sys.stderr.write(reply["err"])
                sys.stderr.flush()
            elif "exit" in reply:
                return int(reply["exit"])
            elif "refused" in reply:
                return None
    print("pulsar-audit: the server closed the connection before answering", file=sys.stderr)
    return 2
