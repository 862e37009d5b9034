"""One live consumer's process seen from the harness: started with its WorkerConfig in the
environment, its stdout lines (JSON: ready, summary) on a queue, commands on its stdin, killed
like a crash; and what a killed one left in its trace files."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from capture import process
from capture.consumer_worker import CONFIG_VAR, WorkerConfig
from capture.spool import seal_open
from pulsar_audit.errors import SetupError

READY_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0


class ConsumerStartError(SetupError):
    """A consumer process did not subscribe; the message carries its error output."""


class ConsumerProcess:
    """One consumer process: its stdout lines (JSON) on a queue, commands on its stdin."""

    def __init__(self, config: WorkerConfig, out: Path):
        self.config = config
        self.err = out / "logs" / "client" / f"{config.name}.{config.incarnation}.err"
        self.err.parent.mkdir(parents=True, exist_ok=True)
        with self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "capture.consumer_worker"],
                env={**os.environ, CONFIG_VAR: config.to_json()},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,  # a Ctrl-C of the harness is the harness's to handle
            )
        self.lines: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, name=f"{config.name}-out", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def _next(self, key: str, timeout_s: float) -> dict | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if message is None:
                return None
            if key in message:
                return message
        return None

    def wait_ready(self) -> None:
        if self._next("ready", READY_TIMEOUT_S) is None:
            self.kill()
            raise ConsumerStartError(
                f"consumer {self.config.name} did not subscribe to {self.config.topic} "
                f"({self.config.subscription_type}) within {READY_TIMEOUT_S:.0f} s.\n"
                f"--- last lines of {self.err}:\n{process.tail(self.err, 15)}"
            )

    def tell(self, command: str, last: bool = True) -> None:
        """Write `command` on its stdin; close it after the `last` one."""
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
            if last:
                self.proc.stdin.close()

    def summary(self) -> dict:
        """Its summary once it has exited (killed when it does not within EXIT_TIMEOUT_S)."""
        found = self._next("summary", EXIT_TIMEOUT_S)
        if found is None:
            self.kill()
            return {"name": self.config.name, "incarnation": self.config.incarnation,
                    "pid": self.pid, "error": "no summary: killed"}  # fmt: skip
        self.proc.wait(timeout=EXIT_TIMEOUT_S)
        return found["summary"]

    def kill(self) -> None:
        """SIGKILL it; the trace segment it was writing (rolling) then takes its final name."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(timeout=EXIT_TIMEOUT_S)
        seal_open(self.config.out, self.config.prefix)


def killed_summary(out: Path, proc: ConsumerProcess) -> dict:
    """What a killed consumer process had recorded, from its trace files."""
    events = [json.loads(line) for path in out.glob(f"{proc.config.prefix}-*.jsonl")
              for line in path.open()]  # fmt: skip
    receives = [event for event in events if event["event"] == "receive"]
    return {
        "name": proc.config.name,
        "incarnation": proc.config.incarnation,
        "pid": proc.pid,
        "killed": True,
        "received": len(receives),
        "nacked": sum(1 for event in receives if event.get("negative_ack")),
        "events": len(events),
    }


def next_event_index(out: Path, run_id: str, name: str) -> int:
    """The event_index after the last one a consumer's earlier processes recorded."""
    last = -1
    for path in out.glob(f"trace-{run_id}-{name}.*-*.jsonl"):
        with path.open() as handle:
            for line in handle:
                with contextlib.suppress(ValueError):
                    last = max(last, json.loads(line).get("event_index", -1))
    return last + 1
