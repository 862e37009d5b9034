"""`pulsar-audit shell`: one session, many questions. Each line is a command as typed after
`pulsar-audit` (`sql "select …"`, `message RUN --seq 50`, `summary`); the options given to
`shell` (--lakehouse, --env …) apply to every line. A line goes to the lakehouse's running
server when there is one, else it runs in this process, whose Spark session the next line
reuses. Lines are kept in a readline history file."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from jobs.context import EXIT_OK, Context

HISTORY_VARIABLE = "PULSAR_AUDIT_HISTORY"
HISTORY_LENGTH = 1000
PROMPT = "pulsar-audit> "
SHARED_OPTIONS = {"env": "--env", "lakehouse": "--lakehouse", "master": "--master"}
SHARED_OPTIONS |= {"catalog": "--catalog", "schema_prefix": "--schema-prefix"}


def history_path() -> Path:
    return Path(os.environ.get(HISTORY_VARIABLE) or "~/.pulsar_audit_history").expanduser()


def line_argv(line: str, shared: list[str]) -> list[str]:
    """The command line of one typed line: its words, then the shell's options it does not
    set itself (a pasted leading `pulsar-audit` is dropped)."""
    words = shlex.split(line)
    if words and words[0] == "pulsar-audit":
        words = words[1:]
    given = {w.split("=", 1)[0] for w in words if w.startswith("--")}
    extra: list[str] = []
    for flag, value in zip(shared[::2], shared[1::2], strict=True):
        if flag not in given:
            extra += [flag, value]
    return [*words, *extra] if words else []


def answer(argv: list[str]) -> int:
    """Answer one line: through the running server, or in this process."""
    from jobs import warm
    from jobs.cli import build_parser
    from jobs.server import run_command

    code = warm.answer_from_server(argv, autostart=False)
    return run_command(build_parser(), argv) if code is None else code


def repl(ctx: Context) -> int:
    """Read lines until `exit`, `quit` or end of input; print each answer and its exit code
    when not 0."""
    import readline

    args = ctx.args
    shared = [
        w
        for k, f in SHARED_OPTIONS.items()
        if getattr(args, k, None)
        for w in (f, getattr(args, k))
    ]
    history, interactive = history_path(), sys.stdin.isatty()
    readline.set_history_length(HISTORY_LENGTH)
    if history.exists():
        readline.read_history_file(history)
    try:
        while True:
            try:
                line = input(PROMPT if interactive else "").strip()
            except EOFError:
                break
            except KeyboardInterrupt:
                print()
                continue
            if not line or line.startswith("#"):
                continue
            if not interactive:  # input() keeps history only at a terminal
                readline.add_history(line)
            if line in ("exit", "quit"):
                break
            if line == "help":
                line = "--help"
            try:
                code = answer(line_argv(line, shared))
            except ValueError as exc:  # an unclosed quote
                print(f"pulsar-audit shell: {exc}", file=sys.stderr)
                continue
            except KeyboardInterrupt:
                print("interrupted", file=sys.stderr)
                continue
            if code:
                print(f"(exit {code})", file=sys.stderr)
    finally:
        history.parent.mkdir(parents=True, exist_ok=True)
        readline.write_history_file(history)
    return EXIT_OK
