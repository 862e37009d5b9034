"""A local Pulsar's processes as `pulsar-audit cluster` records them (state.json in its work
directory), started and waited for until they serve, and stopped: what the standalone and the
multi-process cluster (cluster.py, multi.py) share."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests

from capture import process
from capture.process import ProcessSpec
from pulsar_audit.errors import SetupError

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
    # the brokers' autoSkipNonRecoverableData: a read of entries no bookie has any more skips
    # them (as an operator sets it to unblock consumers after a loss) instead of failing
    skip_lost_data: bool = False
    ledger_entries: int = 0  # the brokers roll a topic's ledger at this many entries (0: default)

    @property
    def autorecovery(self) -> bool:
        return bool(self.by_role("autorecovery"))

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
    """Stop AutoRecovery (so that it does not act on the bookies stopping), brokers, bookies,
    then ZooKeeper; the processes of one role stop together."""
    result: dict[str, str] = {}
    for role in ("autorecovery", "broker", "standalone", "bookie", "zookeeper"):
        group = [spec for spec in specs if spec.role == role]
        result.update(process.stop_all({spec.name: spec.pid for spec in group}))
    return result


def kill_and_restart(
    state: ClusterState, victims: list[ProcessSpec], sig: int, down_s: float
) -> None:
    """Signal the processes, wait until they are gone, keep them down `down_s`, start them."""
    process.kill_all(victims, sig)
    time.sleep(down_s)
    for victim in victims:
        process.spawn(victim)
        log.info("restarted %s as pid %d", victim.name, victim.pid)
    save_state(state)
    if any(victim.role == "broker" for victim in victims):
        wait_ready(state)
