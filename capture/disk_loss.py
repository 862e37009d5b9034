"""A bookie that loses its disk: its journal, ledger and index directories are deleted while
it is down, and it comes back empty under the same identity.

A bookie keeps a cookie (its identity and directories) both in each of its directories
(`current/VERSION`) and in ZooKeeper (`/ledgers/cookies/<bookie id>`). Started on empty
directories with its old cookie still in ZooKeeper it refuses to start (the cookie check
guards against a bookie silently coming back without its data). An operator who replaced
the disk runs `bookkeeper shell bookieformat -nonInteractive -force -deleteCookie` with the
bookie's configuration: it formats the (now empty) directories and deletes the cookie from
ZooKeeper, and the next start writes a fresh one. `lose_disks` does the same, with the same
BookKeeper shell, from the jars the cluster runs on.
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from capture import launch, process
from capture.process import ProcessSpec
from capture.processes import ClusterState, save_state
from pulsar_audit.errors import SetupError, UsageError

log = logging.getLogger(__name__)

# Every key of a bookie's configuration naming a directory that holds its entries (the
# journal, the entry logs and the index) or its cookie (kept in each of them).
DIR_KEYS = ("journalDirectory", "journalDirectories", "ledgerDirectories", "indexDirectories")
SHELL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class WipePlan:
    """What losing one bookie's disk deletes: its directories, all under the cluster's data."""

    bookie: str
    conf: Path
    dirs: tuple[Path, ...]


def check_quorum(action: str, state: ClusterState, config: tuple[int, int, int]) -> None:
    """Refuse an E-Qw-Qa the cluster's bookies cannot hold, and a quorum wipe that would take
    every bookie (and with them the cursors' and system topics' ledgers)."""
    e, qw, _ = config
    if e > state.bookies:
        raise UsageError(
            f"--config {'-'.join(map(str, config))}: an ensemble of {e} needs as many "
            f"bookies; the cluster has {state.bookies}"
        )
    if action.startswith("wipe-qw-bookies-disk") and qw >= state.bookies:
        raise UsageError(
            f"chaos action {action} at Qw = {qw} would wipe every one of the "
            f"cluster's {state.bookies} bookies (the cursors' and system topics' ledgers with "
            "them): start the cluster with more bookies than the write quorum"
        )


def conf_of(spec: ProcessSpec) -> Path:
    """The configuration file a bookie (or the autorecovery process) was started with."""
    if "--conf" not in spec.argv:
        raise SetupError(f"{spec.name} was not started with --conf: no bookie configuration")
    return Path(spec.argv[spec.argv.index("--conf") + 1])


def bookie_dirs(conf: Path) -> list[Path]:
    """The directories of DIR_KEYS in a bookie configuration (comma lists split), in order."""
    dirs: list[Path] = []
    for line in conf.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in DIR_KEYS and not line.lstrip().startswith("#"):
            dirs += [Path(item.strip()) for item in value.split(",") if item.strip()]
    return list(dict.fromkeys(dirs))


def plan_wipe(spec: ProcessSpec, data_root: Path) -> WipePlan:
    """The wipe of `spec`'s disk; refuses a directory outside `data_root` (the cluster's data),
    so that a configuration pointing elsewhere cannot make the fault delete anything else."""
    conf = conf_of(spec)
    dirs = bookie_dirs(conf)
    root = data_root.resolve()
    outside = [d for d in dirs if not d.resolve().is_relative_to(root)]
    if not dirs or outside:
        raise SetupError(
            f"{spec.name}: expected its directories ({', '.join(DIR_KEYS)} in {conf}) under "
            f"{root}; found {[str(d) for d in dirs]}"
        )
    return WipePlan(spec.name, conf, tuple(dirs))


def wipe(plan: WipePlan) -> dict:
    """Delete the directories of `plan` with everything in them and leave them empty, as a
    new disk would be; returns how many files and bytes went."""
    files = size = 0
    for directory in plan.dirs:
        if directory.exists():
            found = [p for p in directory.rglob("*") if p.is_file()]
            files += len(found)
            size += sum(p.stat().st_size for p in found)
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
    return {"dirs": len(plan.dirs), "files": files, "bytes": size}


def delete_cookie(spec: ProcessSpec, workdir: Path) -> dict:
    """`bookkeeper shell bookieformat -nonInteractive -force -deleteCookie` with the bookie's
    configuration: formats its directories and deletes its cookie from ZooKeeper."""
    log_file = workdir / "logs" / f"{spec.name}-format.log"
    argv = launch.java_command(
        "bookie-shell",
        log_file,
        ["-conf", str(conf_of(spec)), "bookieformat", "-nonInteractive", "-force", "-deleteCookie"],
    )
    out = workdir / "logs" / f"{spec.name}-format.out"
    started = time.monotonic()
    with out.open("ab") as handle:
        result = subprocess.run(
            argv, stdout=handle, stderr=subprocess.STDOUT, timeout=SHELL_TIMEOUT_S, check=False
        )
    if result.returncode != 0:
        raise SetupError(
            f"bookieformat -deleteCookie for {spec.name} failed (exit {result.returncode}).\n"
            f"--- last lines of {log_file}:\n{process.tail(log_file)}\n{process.tail(out, 10)}"
        )
    return {"cookie": "deleted (bookieformat -deleteCookie)", "format_s": _since(started)}


def lose_disks(
    state: ClusterState, victims: list[ProcessSpec], killed_at: float, down_s: float
) -> dict:
    """With `victims` already killed: wipe their disks, delete their cookies, keep them down
    `down_s` from `killed_at` (past their ZooKeeper session), then start them again, empty."""
    workdir = Path(state.workdir)
    plans = [plan_wipe(victim, workdir / "data") for victim in victims]
    wiped = {plan.bookie: wipe(plan) for plan in plans}
    cookies = {victim.name: delete_cookie(victim, workdir) for victim in victims}
    time.sleep(max(0.0, down_s - (time.monotonic() - killed_at)))
    for victim in victims:
        process.spawn(victim)
        log.info("restarted %s empty as pid %d", victim.name, victim.pid)
    save_state(state)
    return {
        "files_wiped": sum(w["files"] for w in wiped.values()),
        "bytes_wiped": sum(w["bytes"] for w in wiped.values()),
        "cookie": next(iter(cookies.values()))["cookie"],
        "format_s": max(c["format_s"] for c in cookies.values()),
    }


def _since(started: float) -> float:
    return round(time.monotonic() - started, 2)


def lose_in_turn(  # noqa: PLR0913
    state: ClusterState,
    victims: list[ProcessSpec],
    hold_s: float,
    down_s: float,
    report: Callable[[str, dict], None],
    reload: Callable[[], str],
) -> list[dict]:
    """Each of `victims` (the write quorum of the topic's current ledger, chosen before the
    first wipe) loses its disk in turn (down `down_s` each), the next `hold_s` after the
    previous one came back empty: AutoRecovery's time to copy what the first held. Each wipe
    is a fault of its own (phase start, then end with what went); after the last, `reload`
    (the topic's bundle unloaded, named in the last end event): the broker's own handle of
    the ledger it was writing keeps the ensembles it wrote with (on 3.0.2 a reader of that
    open ledger was sent to the two wiped bookies while the re-replicated copy sat on the
    third); a handle opened after the reload has the ensembles AutoRecovery rewrote."""
    turns = []
    for turn, victim in enumerate(victims, start=1):
        if turn > 1:
            time.sleep(hold_s)
        details = {"turn": turn, "of": len(victims), "hold_s": hold_s}
        report(victim.name, {"pid": victim.pid, "host": victim.host, **details})
        killed_at = process.kill_all([victim], signal.SIGKILL)
        lost = lose_disks(state, [victim], killed_at, down_s)
        if turn == len(victims):
            lost["reloaded"] = reload()
        report(victim.name, {"phase": "end", "restarted": True, "turn": turn, **lost})
        turns.append({"bookie": victim.name, **lost})
    return turns
