"""`python -m jobs.server`: the warm server of one lakehouse (`pulsar-audit server start`).

It builds one Spark session, warms it with a question, then answers the questions of CLI
clients (jobs/warm.py) over a Unix socket, one at a time: each question runs the same command
handler as a cold CLI call, its stdout and stderr streamed back as they are printed, its
exit code last. It also runs `analyze` for its lakehouse, in the same session (the input's
settings for that job only: jobs/analyze.py:analyze_path), in a thread of its own: meanwhile
it answers `status` (busy, with what) and `stop`, and refuses the rest, which the clients
then run cold. A client that goes away does not stop a job, which ends as it would have. A
job is refused once the package's code differs from what the server imported. It stops on
`server stop` (after a running job), on SIGTERM, after `--idle-timeout` seconds without a
question, or when its Spark session is gone; the socket and its state file go with it.
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
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

from checks.warm import warm_up_in_background
from jobs import context
from jobs import server_link as link
from jobs.receipt import code_fingerprint
from jobs.server_control import DEFAULT_IDLE_TIMEOUT_S
from jobs.warm import is_job

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
        # the job (`analyze`) running in its own thread, and what it is: meanwhile the server
        # answers `status` and `stop`, and refuses the rest (the client then runs it cold)
        self.job: threading.Thread | None = None
        self.busy: str | None = None
        # the package's code as this process imported it: a job is refused once the files
        # differ (it would write with old code what a receipt records as the new code's)
        self.code = code_fingerprint()

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
            **({"busy": self.busy} if self.busy else {}),
        }

    def serve(self) -> int:
        from jobs.cli import build_parser

        begun = time.monotonic()
        self.parser = build_parser()
        checks = warm_up_in_background()  # GX while the JVM starts (both take seconds)
        _ = self.ctx.spark  # the JVM, Spark and Delta: what every cold question pays
        self._warm_up()
        checks.join()
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
            if self._idle():
                print(f"idle for {self.idle_timeout:g} s: stopping", flush=True)
                return
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            if not self._handle(conn):
                conn.close()
            self.last_activity = time.monotonic()
        if self.job is not None:  # stopped while a job runs: it ends first
            self.job.join()

    def _idle(self) -> bool:
        if self.job is not None and self.job.is_alive():
            self.last_activity = time.monotonic()  # a running job is not idleness
        return time.monotonic() - self.last_activity > self.idle_timeout

    def _handle(self, conn: socket.socket) -> bool:
        """Answer one client; True when a job thread took the connection over."""
        try:
            request = next(iter(link.replies(conn)), None)
            if request is None:
                return False
            refused = self._refusal(request)
            if request.get("op") == "status":
                link.send(conn, self.status())
            elif request.get("op") == "stop":
                self.stopping = True
                link.send(conn, {**self.status(), "stopping": True})
            elif refused:
                link.send(conn, {"refused": refused})
            elif is_job(request["argv"]):
                self.busy = f"{' '.join(request['argv'])} (since {time.strftime('%H:%M:%S')})"
                self.job = threading.Thread(
                    target=self._run_job, args=(conn, request), name="job", daemon=True
                )
                self.job.start()
                return True
            else:
                self._answer(conn, request)
        except (BrokenPipeError, ConnectionResetError):  # the client went away (Ctrl-C)
            print("a client went away before its answer was complete", flush=True)
        except Exception:  # e.g. the client's folder is gone: it answers cold, we go on
            traceback.print_exc()
            with contextlib.suppress(OSError):
                link.send(conn, {"refused": "the server could not run the question"})
        return False

    def _refusal(self, request: dict[str, Any]) -> str | None:
        """Why the server does not run `request` (the client runs it cold), or None."""
        if "op" in request:
            return None
        if request.get("identity") != self.identity:
            return "the question's config is not the server's"
        if self.job is not None and self.job.is_alive():
            return f"busy with `{self.busy}`"
        if is_job(request["argv"]) and code_fingerprint() != self.code:
            return "the code changed since the server started: `server stop`, then start it"
        return None

    def _answer(self, conn: socket.socket, request: dict[str, Any]) -> None:
        self.questions += 1
        with _answering(conn, request["cwd"]):
            code = run_command(self.parser, request["argv"])
        link.send(conn, {"exit": code})
        if not self._session_alive():
            print("the Spark session is gone: stopping", flush=True)
            self.stopping = True

    def _run_job(self, conn: socket.socket, request: dict[str, Any]) -> None:
        """A job in its thread; a client that goes away does not stop it (it ends as it
        would have: its output is dropped)."""
        try:
            self._answer(conn, request)
        except (BrokenPipeError, ConnectionResetError):
            print("a client went away before its job was done", flush=True)
        except Exception:
            traceback.print_exc()
        finally:
            conn.close()
            self.busy = None
            self.last_activity = time.monotonic()

    def _session_alive(self) -> bool:
        """Whether the server's Spark session still runs (its JVM may have died: out of
        memory, killed); a server without one stops, so that its clients answer cold."""
        try:
            return not self.ctx.spark.sparkContext._jsc.sc().isStopped()  # noqa: SLF001
        except Exception:  # noqa: BLE001 - the gateway itself is gone
            return False

    def _warm_up(self) -> None:
        """Answer two questions into the void: loads the classes and the Delta logs every
        later question uses, so that the first real one is warm too (the checks' GX context
        an `analyze` needs is built beside, `serve`)."""
        sink = open(os.devnull, "w")  # noqa: SIM115 - closed below
        with sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            for question in (["summary"], ["sql", "select count(*) from gold.anomalies"]):
                run_command(self.parser, [*question, *self.common_argv])


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
