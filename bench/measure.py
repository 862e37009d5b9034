"""Run one command as its own process tree and measure it: wall time and peak RSS of the tree."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

SAMPLE_S = 0.2


@dataclass
class Measured:
    """One process run: what ran, how long, the tree's peak RSS, and how it ended."""

    name: str
    command: list[str]
    wall_s: float
    peak_rss_gb: float
    peak_pss_gb: float  # shared pages (forked Python workers) counted once
    cpu_s: float  # user + system CPU seconds of the tree (sampled; a busy machine inflates wall)
    exit_code: int | None
    status: str  # ok | failed | killed (over the memory cap) | skipped
    stdout: str
    stderr: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def skipped(name: str, command: list[str], why: str) -> Measured:
    return Measured(name, command, 0.0, 0.0, 0.0, 0.0, None, f"skipped: {why}", "", "")


def _tree_memory(
    root: psutil.Process, cpu: dict[int, float]
) -> tuple[int, int, list[psutil.Process]]:
    """RSS and PSS in bytes of `root` and all its descendants (the JVM under a Python CLI
    included). RSS counts a page shared by forked processes once per process, PSS shares it.
    Records each member's CPU seconds so far in `cpu` (by pid)."""
    try:
        members = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, 0, []
    rss = pss = 0
    for proc in members:
        with contextlib.suppress(psutil.Error):
            info = proc.memory_full_info()
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
            times = proc.cpu_times()
            cpu[proc.pid] = max(cpu.get(proc.pid, 0.0), times.user + times.system)
    return rss, pss, members


def _kill_tree(members: list[psutil.Process]) -> None:
    for proc in reversed(members):  # children first
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


def run_measured(
    name: str,
    command: list[str],
    logs: Path,
    cwd: Path,
    rss_cap_gb: float | None = None,
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
) -> Measured:
    """Run `command` from a cold start, sampling the tree's RSS every 0.2 s.

    stdout and stderr go to logs/<name>.out and .err. rss_cap_gb / timeout_s: kill the tree
    (this process's own children only) when exceeded; the status says so. env: variables set
    for the command on top of this process's environment.
    """
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / f"{name}.out", logs / f"{name}.err"
    peak = peak_pss = 0
    cpu: dict[int, float] = {}
    status = "ok"
    started = time.monotonic()
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(
            command, stdout=out, stderr=err, cwd=cwd, env={**os.environ, **(env or {})}
        )
        root = psutil.Process(proc.pid)
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak, peak_pss, status
            while not stop.is_set():
                rss, pss, members = _tree_memory(root, cpu)
                peak, peak_pss = max(peak, rss), max(peak_pss, pss)
                over_cap = rss_cap_gb is not None and rss > rss_cap_gb * 1e9
                over_time = timeout_s is not None and time.monotonic() - started > timeout_s
                if over_cap or over_time:
                    status = (
                        f"killed: over {rss_cap_gb} GB"
                        if over_cap
                        else f"killed: over {timeout_s:.0f} s"
                    )
                    _kill_tree(members)
                    return
                stop.wait(SAMPLE_S)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        exit_code = proc.wait()
        wall = time.monotonic() - started
        stop.set()
        sampler.join()
    if status == "ok" and exit_code != 0:
        status = "failed"
    return Measured(
        name,
        command,
        round(wall, 2),
        round(peak / 1e9, 2),
        round(peak_pss / 1e9, 2),
        round(sum(cpu.values()), 1),
        exit_code,
        status,
        out_path.read_text(),
        err_path.read_text()[-4000:],
    )
