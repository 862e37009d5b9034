"""Start, stop and ask the status of a lakehouse's warm server (jobs/server.py) from the
command line's side: a detached process, found through its socket (jobs/server_link.py)."""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from jobs import server_link as link
from pulsar_audit.config import Config

DEFAULT_IDLE_TIMEOUT_S = 1800.0
START_TIMEOUT_S = 600.0  # a JVM on a busy machine; the log says what went wrong before that
STOP_TIMEOUT_S = 60.0
COMMON_FLAGS = {"env": "--env", "master": "--master", "catalog": "--catalog"}
COMMON_FLAGS["schema_prefix"] = "--schema-prefix"


def server_status(config: Config) -> dict[str, Any]:
    """The running server's status, or {"running": False, …}; removes a stale socket."""
    path = link.socket_path(config.lakehouse_path)
    status = link.request_op(path, "status") if path.exists() else None
    if status is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return {"running": False, "lakehouse": str(config.lakehouse_path)}
    return status


def start_server(
    args: argparse.Namespace, config: Config, idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
) -> dict[str, Any]:
    """Start the lakehouse's server as a detached process unless one runs; wait until it
    answers. Its status, with `running` False (and the log's tail) when it did not start."""
    status = server_status(config)
    if status["running"]:
        return {**status, "already": True}
    config.lakehouse_path.mkdir(parents=True, exist_ok=True)
    log_path = config.lakehouse_path / link.LOG_NAME
    command = [sys.executable, "-m", "jobs.server", "--idle-timeout", str(idle_timeout)]
    command += ["--lakehouse", str(config.lakehouse_path)]
    for key, flag in COMMON_FLAGS.items():
        if getattr(args, key, None):
            command += [flag, getattr(args, key)]
    begun = time.monotonic()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(  # noqa: S603 - our own module, our own arguments
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # not ended with the terminal or the caller's process group
            cwd=config.lakehouse_path,  # a folder that lives as long as the server needs it
        )
    while time.monotonic() - begun < START_TIMEOUT_S:
        if process.poll() is not None:
            break
        status = server_status(config)
        if status["running"]:
            return {**status, "already": False, "start_s": round(time.monotonic() - begun, 1)}
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    tail = log_path.read_text(errors="replace").splitlines()[-15:]
    return {"running": False, "lakehouse": str(config.lakehouse_path), "log": tail}


def stop_server(config: Config) -> dict[str, Any]:
    """Ask the running server to stop and wait until its process is gone."""
    path = link.socket_path(config.lakehouse_path)
    reply = link.request_op(path, "stop") if path.exists() else None
    if reply is None:
        return server_status(config)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while process_alive(reply["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {
        **reply,
        "running": process_alive(reply["pid"]),
        "stopped": not process_alive(reply["pid"]),
    }


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie whose parent has not reaped it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
