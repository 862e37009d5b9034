"""`python -m jobs.server`: the warm server of one lakehouse (`pulsar-audit server start`).

It builds one Spark session, warms it with a question, then answers the questions of CLI
clients (jobs/warm.py) over a Unix socket, one at a time: each question runs the same command
handler as a cold CLI call, its stdout and stderr streamed back as they are printed, its
exit code last. It also runs `analyze` for its lakehouse, in the same session (the input's
settings for that job only: jobs/analyze.py:analyze_path); a client that goes away does not
stop a job, which ends as it would have. It stops on `server stop`, on SIGTERM, or after
`--idle-timeout` seconds without a question; the socket and its state file go with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from typing import Any

from jobs import context
from jobs import server_link as link
from jobs.server_control import DEFAULT_IDLE_TIMEOUT_S

POLL_S = 0.5  # how often the idle clock is read while no client connects


class _Stream:
    """A text stream whose writes go to the client as {"out"|"err": text} lines."""

    encoding = "utf-8"

    def __init__(self, conn: socket.socket, name: str):
        self.conn, self.name = conn, name

    def write(self, text: str) -> int:
        if text:
            link.send(self.conn, {self.name: text})
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _answering(conn: socket.socket, cwd: str) -> Iterator[None]:
    """Print to the client, log to it (a fresh handler for the command's basicConfig), in
    its working directory; everything restored afterwards."""
    root, before = logging.getLogger(), os.getcwd()
    out, err = _Stream(conn, "out"), _Stream(conn, "err")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # type: ignore[type-var]
            yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        os.chdir(before)


def run_command(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Run `argv` as the CLI would in-process; its exit code, whatever it raises."""
    try:
        return context.run(parser, argv)
    except SystemExit as stop:  # argparse: --help, usage errors
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except Exception:  # the cold CLI would print the traceback and exit 1
        traceback.print_exc()
        return 1


class Server:
    """One lakehouse's session and its socket."""

    def __init__(self, args: argparse.Namespace, common_argv: list[str]):
        self.ctx = context.Context(args)
        self.config = self.ctx.config
        self.idle_timeout = args.idle_timeout
        self.common_argv = common_argv
        self.path = link.socket_path(self.config.lakehouse_path)
        self.state_path = self.config.lakehouse_path / link.STATE_NAME
        self.identity = link.config_identity(self.config)
        self.questions = 0
        self.started = time.time()
        self.last_activity = time.monotonic()
        self.stopping = False
        self.ready_s = 0.0

    def status(self) -> dict[str, Any]:
        return {
            "running": True,
            "pid": os.getpid(),
            "lakehouse": str(self.config.lakehouse_path),
            "socket": str(self.path),
            "env": self.config.env,
            "uptime_s": round(time.time() - self.started, 1),
            "ready_s": round(self.ready_s, 1),
            "questions": self.questions,
            "idle_s": round(time.monotonic() - self.last_activity, 1),
            "idle_timeout_s": self.idle_timeout,
        }

    def serve(self) -> int:
        from jobs.cli import build_parser

        begun = time.monotonic()
        self.parser = build_parser()
        _ = self.ctx.spark  # the JVM, Spark and Delta: what every cold question pays
        self._warm_up()
        self.ready_s = time.monotonic() - begun
        self.config.lakehouse_path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket of a server that was killed
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        self.path.chmod(0o600)  # a question can write files (`report --out`): the owner's only
        listener.listen(16)
        listener.settimeout(POLL_S)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        self.last_activity = time.monotonic()
        self.state_path.write_text(json.dumps(self.status()))
        print(f"ready in {self.ready_s:.1f} s: {json.dumps(self.status())}", flush=True)
        try:
            self._loop(listener)
        finally:
            listener.close()
            for path in (self.path, self.state_path):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            print(f"stopped after {self.questions} question(s)", flush=True)
        self.ctx.spark.stop()
        return 0

    def _loop(self, listener: socket.socket) -> None:
        while not self.stopping:
            if time.monotonic() - self.last_activity > self.idle_timeout:
                print(f"idle for {self.idle_timeout:g} s: stopping", flush=True)
                return
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(None)
                self._handle(conn)
            self.last_activity = time.monotonic()

    def _handle(self, conn: socket.socket) -> None:
        try:
            request = next(iter(link.replies(conn)), None)
            if request is None:
                return
            if request.get("op") == "status":
                link.send(conn, self.status())
            elif request.get("op") == "stop":
                self.stopping = True
                link.send(conn, {**self.status(), "stopping": True})
            elif request.get("identity") != self.identity:
                link.send(conn, {"refused": "the question's config is not the server's"})
            else:
                self.questions += 1
                with _answering(conn, request["cwd"]):
                    code = run_command(self.parser, request["argv"])
                link.send(conn, {"exit": code})
        except (BrokenPipeError, ConnectionResetError):  # the client went away (Ctrl-C)
            print("a client went away before its answer was complete", flush=True)
        except Exception:  # e.g. the client's folder is gone: it answers cold, we go on
            traceback.print_exc()
            with contextlib.suppress(OSError):
                link.send(conn, {"refused": "the server could not run the question"})

    def _warm_up(self) -> None:
        """Answer two questions into the void: loads the classes and the Delta logs every
        later question uses, so that the first real one is warm too; and build the checks'
        GX context an `analyze` needs (seconds, once)."""
        from checks.gx import warm_up

        sink = open(os.devnull, "w")  # noqa: SIM115 - closed below
        with sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            for question in (["summary"], ["sql", "select count(*) from gold.anomalies"]):
                run_command(self.parser, [*question, *self.common_argv])
            warm_up()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m jobs.server", add_help=True)
    parser.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S)
    own, common_argv = parser.parse_known_args(argv)
    args = context.common_options().parse_args(common_argv)
    args.idle_timeout = own.idle_timeout
    return Server(args, common_argv).serve()


if __name__ == "__main__":
    sys.exit(main())
