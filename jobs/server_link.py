"""The warm server's link: where a lakehouse's server listens, what it serves, and the JSON
lines both sides send (jobs/warm.py asks, jobs/server.py answers). No pyspark here."""

from __future__ import annotations

import hashlib
import json
import socket
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from pulsar_audit.config import Config

SOCKET_NAME = "_server.sock"
STATE_NAME = "_server.json"
LOG_NAME = "_server.log"
MAX_SOCKET_PATH = 100  # a Unix socket's path holds at most 107 bytes on Linux


def socket_path(lakehouse: Path) -> Path:
    """Where the lakehouse's server listens: in the lakehouse folder, or (a path too long for
    a socket) in the temporary folder under a name made from the lakehouse's path."""
    inside = lakehouse / SOCKET_NAME
    if len(str(inside)) <= MAX_SOCKET_PATH:
        return inside
    digest = hashlib.sha256(str(lakehouse.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pulsar-audit-{digest}.sock"


def config_identity(config: Config) -> str:
    """A digest of the whole config: the server answers only questions asked with the
    config its session was built for (same env, lakehouse, master, settings)."""
    if config.storage == "path":  # `--lakehouse lh` and its absolute path are one lakehouse
        config = replace(config, lakehouse=str(config.lakehouse_path))
    return hashlib.sha256(repr(config).encode()).hexdigest()


def connect(path: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        raise
    return conn


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def replies(conn: socket.socket):  # noqa: ANN201 - a generator of dicts
    """The JSON lines the other side sends, until it closes."""
    with conn.makefile("rb") as lines:
        for line in lines:
            yield json.loads(line)


def request_op(path: Path, op: str) -> dict[str, Any] | None:
    """Send a control operation (`status`, `stop`) and return the one reply; None when no
    server listens at `path`."""
    try:
        with connect(path) as conn:
            send(conn, {"op": op})
            return next(iter(replies(conn)), None)
    except (ConnectionRefusedError, FileNotFoundError):
        return None
