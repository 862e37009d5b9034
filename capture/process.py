"""Local processes of a Pulsar cluster: start detached, signal by pid, memory, ports, log tails."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class ProcessSpec:
    """How to (re)start one JVM of the cluster, and where it logs.

    name: unique in the cluster ("standalone", "zookeeper", "bookie-1", "broker-2").
    role: standalone | zookeeper | bookie | broker.
    log: the log4j file the process writes (what log ingest reads); out: its stdout/stderr.
    host: the address it listens on; netns: its network namespace ("" = this machine's).
    """

    name: str
    role: str
    argv: list[str]
    log: str
    out: str
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    pid: int = 0
    host: str = "127.0.0.1"
    netns: str = ""

    def address(self, port: str) -> str:
        """host:port of one of its ports, e.g. address("bookie") → 10.1.2.3:3181."""
        return f"{self.host}:{self.ports[port]}"

    def as_dict(self) -> dict:
        return asdict(self)


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (held open together so they cannot repeat)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def spawn(spec: ProcessSpec) -> int:
    """Start the process in its own session (so a Ctrl-C of the caller does not reach it)."""
    Path(spec.out).parent.mkdir(parents=True, exist_ok=True)
    with open(spec.out, "ab") as out:
        # `ip netns exec` enters the namespace and execs the JVM: the pid stays the JVM's.
        prefix = ["ip", "netns", "exec", spec.netns] if spec.netns else []
        proc = subprocess.Popen(
            [*prefix, *spec.argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **spec.env},
            start_new_session=True,
        )
    spec.pid = proc.pid
    return proc.pid


def is_alive(pid: int) -> bool:
    """Whether `pid` runs and is not a zombie."""
    if pid <= 0:
        return False
    try:
        _reap(pid)
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _reap(pid: int) -> None:
    """Collect the exit status if `pid` is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def kill(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send `sig` to `pid` if it still runs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def kill_all(victims: list[ProcessSpec], sig: int) -> float:
    """Signal every victim at once and wait until all are gone; returns when they were hit."""
    hit_at = time.monotonic()
    for victim in victims:
        kill(victim.pid, sig)
    for victim in victims:
        if not wait_gone(victim.pid, 60.0):
            kill(victim.pid, signal.SIGKILL)
            wait_gone(victim.pid, 10.0)
    return hit_at


def stop_all(pids: dict[str, int], timeout_s: float = 20.0) -> dict[str, str]:
    """SIGTERM every process at once, wait up to `timeout_s`, SIGKILL the ones left.
    Returns name → "stopped" | "killed" | "not running"."""
    result = {name: "not running" for name, pid in pids.items() if not is_alive(pid)}
    alive = {name: pid for name, pid in pids.items() if name not in result}
    for pid in alive.values():
        kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive and time.monotonic() < deadline:
        for name in [name for name, pid in alive.items() if not is_alive(pid)]:
            result[name] = "stopped"
            del alive[name]
        time.sleep(0.1)
    for name, pid in alive.items():
        kill(pid, signal.SIGKILL)
        wait_gone(pid, 10.0)
        result[name] = "killed"
    return result


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while is_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def rss_mb(pid: int) -> float | None:
    """Resident memory of `pid` in MiB (None when it is not running)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def tail(path: str | Path, lines: int = 30) -> str:
    """The last `lines` lines of a text file ("" when it does not exist)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
