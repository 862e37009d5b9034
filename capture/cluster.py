"""Start, stop and inspect a local Pulsar: standalone (one JVM) or multi-process (see multi.py).

A cluster lives in a work directory (default .cache/pulsar/run, git-ignored): `state.json`
(kind, URLs, and per process its pid, ports, command and log file), `conf/`, `data/`, `logs/`.
Every `up` starts from empty data, on free loopback ports.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from capture import launch, process
from capture.process import ProcessSpec
from capture.processes import (
    ClusterState,
    load_state,
    save_state,
    start_and_wait,
    state_path,
    stop_processes,
)
from pulsar_audit.errors import SetupError
from pulsar_audit.paths import cache_dir

log = logging.getLogger(__name__)


def default_workdir() -> Path:
    return cache_dir() / "pulsar" / "run"


def running(workdir: Path) -> ClusterState | None:
    """The cluster of `workdir` if every one of its processes runs, else None."""
    state = load_state(workdir)
    if state and all(process.is_alive(spec.pid) for spec in state.processes):
        return state
    return None


def rollover_settings(ledger_entries: int) -> dict[str, str]:
    """The brokers' settings that roll a ledger at `ledger_entries` entries (none for 0)."""
    if not ledger_entries:
        return {}
    return {
        "managedLedgerMaxEntriesPerLedger": str(ledger_entries),
        "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    }


def up(
    workdir: Path | None = None,
    brokers: int = 1,
    bookies: int = 1,
    netns: bool = False,
    session_ms: int | None = None,
    load_manager: str = "modular",
    session_expired: str = "reconnect",
    autorecovery: bool = False,
    skip_lost_data: bool = False,
    ledger_entries: int = 0,
) -> ClusterState:
    """Start a cluster in `workdir` (standalone when 1 broker and 1 bookie and nothing else is
    asked for), or return the one already running there if it has the same shape.

    netns: every process in its own network namespace on a private bridge (see netns.py), so
    that links can be cut; session_ms: the brokers' ZooKeeper session timeout; load_manager:
    "modular" (Pulsar's default) or "extensible" (bundles can be transferred, PIP-192);
    session_expired: what a broker does when its ZooKeeper session expires, "reconnect"
    (Pulsar 4.0's default) or "shutdown" (it halts, as Pulsar 2.x brokers did); autorecovery:
    BookKeeper's AutoRecovery (auditor and replication worker) runs as a process of its own;
    skip_lost_data: the brokers skip entries no bookie has any more (autoSkipNonRecoverableData)
    instead of failing the reads, so that a reader can reach the end after a loss;
    ledger_entries: a topic's ledger rolls over at this many entries, at once (0: Pulsar's
    50,000 entries, not before 10 minutes), so that a short run writes many ledgers."""
    workdir = Path(workdir or default_workdir()).resolve()
    current = running(workdir)
    if current:
        shape = (current.brokers, current.bookies, current.network is not None)
        shape += (current.session_expired, current.autorecovery, current.skip_lost_data)
        shape += (current.ledger_entries,)
        wanted = (brokers, bookies, netns, session_expired, autorecovery, skip_lost_data)
        if shape != (*wanted, ledger_entries):
            raise SetupError(
                f"a {current.kind} with {current.brokers} broker(s) and {current.bookies} "
                f"bookie(s){' (netns)' if current.network else ''}"
                f"{' and AutoRecovery' if current.autorecovery else ''}"
                f"{' skipping lost data' if current.skip_lost_data else ''}"
                f"{f' rolling ledgers at {current.ledger_entries}' * bool(current.ledger_entries)}"
                " whose brokers "
                f"{current.session_expired} on session expiry already runs in {workdir}; "
                "`pulsar-audit cluster down` first"
            )
        return current
    down(workdir)
    for sub in ("data", "conf"):
        shutil.rmtree(workdir / sub, ignore_errors=True)
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    started = time.time()
    multi = (brokers, bookies, netns, load_manager, autorecovery, skip_lost_data) != (
        1, 1, False, "modular", False, False,
    ) or bool(ledger_entries)  # fmt: skip
    if not multi:
        state = _start_standalone(workdir)
    else:
        from capture.multi import Timeouts, start_multi
        from capture.netns import Network

        network = Network.create() if netns else None
        timeouts = Timeouts(
            broker_session_ms=session_ms or Timeouts.broker_session_ms,
            broker_session_expired=session_expired,
        )
        try:
            settings = {"autoSkipNonRecoverableData": "true"} if skip_lost_data else {}
            settings |= rollover_settings(ledger_entries)
            state = start_multi(
                workdir, brokers, bookies, network, timeouts, load_manager, autorecovery, settings
            )
        except BaseException:
            if network:
                network.teardown()
            raise
    state.load_manager, state.session_expired = load_manager, session_expired
    state.skip_lost_data, state.ledger_entries = skip_lost_data, ledger_entries
    state.started_at, state.startup_s = started, round(time.time() - started, 2)
    save_state(state)
    return state


def _start_standalone(workdir: Path) -> ClusterState:
    broker_port, web_port, zk_port, bookie_port = process.free_ports(4)
    conf = launch.render(
        "standalone.conf", workdir / "conf" / "standalone.conf", broker_port=broker_port,
        web_port=web_port,
    )  # fmt: skip
    data = workdir / "data"
    args = [
        "--config", str(conf), "-nfw", "-nss", "-a", "127.0.0.1",
        "--zookeeper-port", str(zk_port), "--bookkeeper-port", str(bookie_port),
        "--zookeeper-dir", str(data / "zookeeper"), "--bookkeeper-dir", str(data / "bookkeeper"),
    ]  # fmt: skip
    log_file = workdir / "logs" / "standalone.log"
    spec = ProcessSpec(
        name="standalone",
        role="standalone",
        argv=launch.java_command("standalone", log_file, args),
        log=str(log_file),
        out=str(workdir / "logs" / "standalone.out"),
        env={"PULSAR_STANDALONE_USE_ZOOKEEPER": "1"},
        ports={"broker": broker_port, "web": web_port, "zookeeper": zk_port, "bookie": bookie_port},
    )
    state = ClusterState(
        kind="standalone",
        workdir=str(workdir),
        service_url=f"pulsar://127.0.0.1:{broker_port}",
        admin_url=f"http://127.0.0.1:{web_port}",
        brokers=1,
        bookies=1,
        processes=[spec],
    )
    start_and_wait(state, [spec])
    return state


def down(workdir: Path | None = None) -> dict[str, str]:
    """Stop every process recorded in `workdir` and forget the cluster (data stays for a look)."""
    workdir = Path(workdir or default_workdir()).resolve()
    state = load_state(workdir)
    if state is None:
        return {}
    result = stop_processes(state.processes)
    if state.network:
        from capture.netns import Network

        Network.from_dict(state.network).teardown()
    state_path(workdir).unlink(missing_ok=True)
    return result


def status(workdir: Path | None = None) -> dict:
    """Kind, URLs and per process: pid, alive, RSS (MiB), ports, log file."""
    workdir = Path(workdir or default_workdir()).resolve()
    state = load_state(workdir)
    if state is None:
        return {"workdir": str(workdir), "running": False, "processes": []}
    rows = [
        {
            "name": spec.name,
            "pid": spec.pid,
            "alive": process.is_alive(spec.pid),
            "rss_mb": process.rss_mb(spec.pid),
            "ports": spec.ports,
            "log": spec.log,
        }
        for spec in state.processes
    ]
    return {
        "workdir": str(workdir),
        "running": all(row["alive"] for row in rows),
        "kind": state.kind,
        "service_url": state.service_url,
        "admin_url": state.admin_url,
        "startup_s": state.startup_s,
        "processes": rows,
    }
