"""`capture run --watch` / `chaos run --watch`: `pulsar-audit watch` of the run's landing folder
in a child process beside the capture (issue 29).

The child has its own lakehouse and checkpoint (under `home`, outside the landing folder: the
watch takes every `*.parquet` under it) and runs with `--final --json`: after each micro-batch
it writes a JSON line on stderr, which is printed here as the batch's text as it comes; its
other stderr lines go to `home/watch.log`. When the run is over it gets SIGTERM: it finishes the
micro-batch it is in, leaves (analyze of the folder, every run reconciled) and prints its result
on stdout. It runs in its own process group, so that nothing of it (its JVM included) outlives
the run: a child that does not leave in time, or a capture that fails, ends with SIGKILL of the
group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serve.live_view import batch_text

LEAVE_TIMEOUT_S = 1800.0  # its last micro-batch, then analyze of the whole folder
ABORT_TIMEOUT_S = 60.0  # a failed capture waits this long for a clean leave, then kills
TRIGGER_S = 1.0


class WatchBeside:
    """The watch child of one capture; `say` prints a line on the run's terminal."""

    def __init__(
        self, landing: Path, home: Path, say: Callable[[str], None], env: str | None = None
    ):
        self.landing, self.home, self.say, self.env = landing, home, say, env
        self.views: list[dict[str, Any]] = []
        self.during_run = 0  # micro-batches seen before the run ended
        self.proc: subprocess.Popen | None = None
        self._stdout: list[str] = []
        self._readers: list[threading.Thread] = []

    def command(self) -> list[str]:
        """`pulsar-audit watch` of the landing folder, with this watch's lakehouse and
        checkpoint."""
        command = [sys.executable, "-m", "jobs.cli", "watch", str(self.landing),
                   "--lakehouse", str(self.home / "lakehouse"),
                   "--checkpoint", str(self.home / "checkpoint"),
                   "--trigger-s", str(TRIGGER_S), "--final", "--json"]  # fmt: skip
        return [*command, "--env", self.env] if self.env else command

    def __enter__(self) -> WatchBeside:
        self.landing.mkdir(parents=True, exist_ok=True)  # the watch checks its PATH exists
        self.home.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group: a kill takes its JVM too
        )
        log = (self.home / "watch.log").open("w")
        # said before the readers start: the child's first micro-batch line comes after it
        self.say(f"watch of {self.landing} started (pid {self.proc.pid}, log {log.name})")
        self._read(self.proc.stdout, self._stdout.append)
        self._read(self.proc.stderr, lambda line: self._on_stderr(line, log), log.close)
        return self

    def __exit__(self, kind: type | None, *exc: object) -> None:
        if kind is not None:  # the capture failed: the watch goes too
            self._stop(ABORT_TIMEOUT_S)

    def _read(self, stream: Any, take: Callable[[str], None], done: Callable | None = None) -> None:  # noqa: ANN401
        def read() -> None:
            for line in stream:
                take(line)
            if done:
                done()

        thread = threading.Thread(target=read, name="watch-child", daemon=True)
        thread.start()
        self._readers.append(thread)

    def _on_stderr(self, line: str, log: Any) -> None:  # noqa: ANN401 - a text file
        view = None
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                view = json.loads(line)
        if isinstance(view, dict) and "micro_batch" in view:
            # said before it is counted: whoever waits for the count finds it on the terminal
            self.say("\n".join(f"watch | {text}" for text in batch_text(view).splitlines()))
            self.views.append(view)
        else:
            log.write(line)
            log.flush()

    def finish(self) -> dict[str, Any]:
        """The run is over: the watch leaves (its last micro-batch, analyze, every run
        reconciled); what it did, with its result."""
        self.during_run = len(self.views)
        self.say(f"run over: the watch leaves ({self.during_run} micro-batch(es) so far)")
        code = self._stop(LEAVE_TIMEOUT_S)
        result = None
        with contextlib.suppress(ValueError):
            result = json.loads("".join(self._stdout)) if self._stdout else None
        return {
            "lakehouse": str(self.home / "lakehouse"),
            "log": str(self.home / "watch.log"),
            "exit_code": code,
            "micro_batches_during_run": self.during_run,
            "micro_batches": len(self.views),
            "result": result,
        }

    def _stop(self, timeout_s: float) -> int | None:
        """SIGTERM, wait up to `timeout_s` for it to leave, else SIGKILL of its group."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.say(f"watch did not leave within {timeout_s:.0f} s: killed")
            code = None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of its group is left
        self.proc.wait()
        deadline = time.monotonic() + 10
        for reader in self._readers:
            reader.join(timeout=max(0.0, deadline - time.monotonic()))
        return code


@contextlib.contextmanager
def watching(wanted: bool, landing: Path, home: Path, env: str | None = None):  # noqa: ANN201
    """A WatchBeside of `landing` keeping its tables in `home` when `wanted` (else None)."""
    if not wanted:
        yield None
        return

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)  # noqa: T201 - the run's terminal

    with WatchBeside(landing, home, say, env) as beside:
        yield beside


def watch_text(watched: dict[str, Any]) -> str:
    """The watch's part of a capture's text output."""
    result = watched["result"] or {}
    states: dict[str, int] = {}
    for finding in result.get("provisional", []):
        key = f"{finding['kind']} {finding['state']}"
        states[key] = states.get(key, 0) + 1
    found = ", ".join(f"{count} {key}" for key, count in sorted(states.items())) or "none"
    return (
        f"watch: {watched['micro_batches']} micro-batch(es), {watched['micro_batches_during_run']}"
        f" during the run; provisional findings: {found}; exit {watched['exit_code']}; "
        f"lakehouse {watched['lakehouse']}"
    )
