"""Start, stop and inspect a local Pulsar: standalone (one JVM) or multi-process (see multi.py).

A cluster lives in a work directory (default .cache/pulsar/run, git-ignored): `state.json`
(kind, URLs, and per process its pid, ports, command and log file), `conf/`, `data/`, `logs/`.
Every `up` starts from empty data, on free loopback ports.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests

from ingest.pulsar import launch, process
from ingest.pulsar.process import ProcessSpec
from pulsar_audit.errors import SetupError
from pulsar_audit.paths import cache_dir

log = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0
PROBE_TOPIC = "persistent://public/default/pulsar-audit-probe"


class PulsarStartError(SetupError):
    """Pulsar did not come up; the message carries the log tail."""


@dataclass
class ClusterState:
    kind: str  # standalone | cluster
    workdir: str
    service_url: str
    admin_url: str
    brokers: int
    bookies: int
    processes: list[ProcessSpec] = field(default_factory=list)
    started_at: float = 0.0
    startup_s: float = 0.0
    network: dict | None = None  # netns.Network.as_dict() when each process has a namespace
    load_manager: str = "modular"
    session_expired: str = "reconnect"  # the brokers' zookeeperSessionExpiredPolicy

    def by_role(self, role: str) -> list[ProcessSpec]:
        return [spec for spec in self.processes if spec.role == role]

    def get(self, name: str) -> ProcessSpec:
        for spec in self.processes:
            if spec.name == name:
                return spec
        raise KeyError(f"no process {name!r} in the cluster (have {self.names()})")

    def names(self) -> list[str]:
        return [spec.name for spec in self.processes]

    def as_dict(self) -> dict:
        return asdict(self)


def default_workdir() -> Path:
    return cache_dir() / "pulsar" / "run"


def state_path(workdir: Path) -> Path:
    return Path(workdir) / "state.json"


def save_state(state: ClusterState) -> None:
    path = state_path(Path(state.workdir))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.as_dict(), indent=1))
    tmp.replace(path)


def load_state(workdir: Path) -> ClusterState | None:
    """The recorded cluster of `workdir`, or None when there is none."""
    path = state_path(workdir)
    if not path.exists():
        return None
    raw = json.loads(path.read_text())
    raw["processes"] = [ProcessSpec(**spec) for spec in raw["processes"]]
    return ClusterState(**raw)


def running(workdir: Path) -> ClusterState | None:
    """The cluster of `workdir` if every one of its processes runs, else None."""
    state = load_state(workdir)
    if state and all(process.is_alive(spec.pid) for spec in state.processes):
        return state
    return None


def up(
    workdir: Path | None = None,
    brokers: int = 1,
    bookies: int = 1,
    netns: bool = False,
    session_ms: int | None = None,
    load_manager: str = "modular",
    session_expired: str = "reconnect",
) -> ClusterState:
    """Start a cluster in `workdir` (standalone when 1 broker and 1 bookie, unless `netns`), or
    return the one already running there if it has the same shape.

    netns: every process in its own network namespace on a private bridge (see netns.py), so
    that links can be cut; session_ms: the brokers' ZooKeeper session timeout; load_manager:
    "modular" (Pulsar's default) or "extensible" (bundles can be transferred, PIP-192);
    session_expired: what a broker does when its ZooKeeper session expires, "reconnect"
    (Pulsar 4.0's default) or "shutdown" (it halts, as Pulsar 2.x brokers did)."""
    workdir = Path(workdir or default_workdir()).resolve()
    current = running(workdir)
    if current:
        shape = (current.brokers, current.bookies, current.network is not None)
        if (*shape, current.session_expired) != (brokers, bookies, netns, session_expired):
            raise SetupError(
                f"a {current.kind} with {current.brokers} broker(s) and {current.bookies} "
                f"bookie(s){' (netns)' if current.network else ''} whose brokers "
                f"{current.session_expired} on session expiry already runs in {workdir}; "
                "`pulsar-audit cluster down` first"
            )
        return current
    down(workdir)
    for sub in ("data", "conf"):
        shutil.rmtree(workdir / sub, ignore_errors=True)
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    started = time.time()
    if brokers == 1 and bookies == 1 and not netns and load_manager == "modular":
        state = _start_standalone(workdir)
    else:
        from ingest.pulsar.multi import Timeouts, start_multi
        from ingest.pulsar.netns import Network

        network = Network.create() if netns else None
        timeouts = Timeouts(
            broker_session_ms=session_ms or Timeouts.broker_session_ms,
            broker_session_expired=session_expired,
        )
        try:
            state = start_multi(workdir, brokers, bookies, network, timeouts, load_manager)
        except BaseException:
            if network:
                network.teardown()
            raise
    state.load_manager, state.session_expired = load_manager, session_expired
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


def start_and_wait(state: ClusterState, specs: list[ProcessSpec]) -> None:
    """Spawn `specs`, then wait until the brokers answer; on failure stop every process of
    `state` and raise PulsarStartError with the log tail of the first one that failed."""
    for spec in specs:
        process.spawn(spec)
    save_state(state)
    try:
        wait_ready(state)
    except PulsarStartError:
        stop_processes(state.processes)
        raise


def wait_ready(state: ClusterState, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Wait until every broker's admin REST lists public/default and a producer connects."""
    deadline = time.monotonic() + timeout_s
    brokers = state.by_role("broker") or state.by_role("standalone")
    for spec in brokers:
        admin = f"http://{spec.address('web')}"
        _wait_for(state, deadline, lambda admin=admin: _admin_answers(admin), f"{admin} (admin)")
    client_log = Path(state.workdir) / "logs" / "probe-client.log"
    _wait_for(
        state,
        deadline,
        lambda: _producer_connects(state.service_url, client_log),
        f"{state.service_url} (producer)",
    )


def _wait_for(state: ClusterState, deadline: float, check, what: str) -> None:  # noqa: ANN001
    while True:
        dead = [spec for spec in state.processes if not process.is_alive(spec.pid)]
        if dead:
            raise PulsarStartError(_failure(dead[0], f"{dead[0].name} exited while waiting"))
        if check():
            return
        if time.monotonic() > deadline:
            worst = (state.by_role("broker") or state.processes)[0]
            raise PulsarStartError(_failure(worst, f"{what} did not answer in time"))
        time.sleep(0.5)


def _failure(spec: ProcessSpec, why: str) -> str:
    return (
        f"Pulsar did not start: {why}.\n--- last lines of {spec.log}:\n{process.tail(spec.log)}"
        f"\n--- last lines of {spec.out}:\n{process.tail(spec.out, 10)}"
    )


def _admin_answers(admin_url: str) -> bool:
    try:
        response = requests.get(f"{admin_url}/admin/v2/namespaces/public", timeout=2)
        return response.status_code == 200 and "public/default" in response.json()
    except (requests.RequestException, ValueError):
        return False


def _producer_connects(service_url: str, client_log: Path) -> bool:
    import pulsar

    logger = pulsar.FileLogger(pulsar.LoggerLevel.Warn, str(client_log))
    client = pulsar.Client(service_url, operation_timeout_seconds=5, logger=logger)
    try:
        client.create_producer(PROBE_TOPIC, send_timeout_millis=5000).close()
        return True
    except Exception:  # noqa: BLE001 - any client error means "not yet"
        return False
    finally:
        client.close()


def stop_processes(specs: list[ProcessSpec]) -> dict[str, str]:
    """Stop brokers, then bookies, then ZooKeeper; the processes of one role stop together."""
    result: dict[str, str] = {}
    for role in ("broker", "standalone", "bookie", "zookeeper"):
        group = [spec for spec in specs if spec.role == role]
        result.update(process.stop_all({spec.name: spec.pid for spec in group}))
    return result


def down(workdir: Path | None = None) -> dict[str, str]:
    """Stop every process recorded in `workdir` and forget the cluster (data stays for a look)."""
    workdir = Path(workdir or default_workdir()).resolve()
    state = load_state(workdir)
    if state is None:
        return {}
    result = stop_processes(state.processes)
    if state.network:
        from ingest.pulsar.netns import Network

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
