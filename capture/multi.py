"""Multi-process cluster on loopback: ZooKeeper, N bookies and M brokers as separate JVMs,
so that killing a broker or a bookie is a real failure of one process."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from capture import launch, process
from capture.netns import INNER_IF, Network
from capture.process import ProcessSpec
from capture.processes import ClusterState, PulsarStartError, start_and_wait, stop_processes

CLUSTER_NAME = "audit"


def _spec(workdir: Path, name: str, role: str, args: list[str], ports: dict, place) -> ProcessSpec:  # noqa: ANN001
    log_file = workdir / "logs" / f"{name}.log"
    host, netns = place(name)
    return ProcessSpec(
        name=name,
        role=role,
        argv=launch.java_command(role, log_file, args),
        log=str(log_file),
        out=str(workdir / "logs" / f"{name}.out"),
        ports=ports,
        host=host,
        netns=netns,
    )


LOAD_MANAGERS = {  # name → (loadManagerClassName, loadBalancerLoadSheddingStrategy)
    "modular": (
        "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
    ),
    # PIP-192: bundles can be transferred to a named broker instead of unloaded
    "extensible": (
        "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
        "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder",
    ),
}


@dataclass(frozen=True)
class Timeouts:
    """ZooKeeper session timeouts (ms): Pulsar's and BookKeeper's defaults unless chosen."""

    broker_session_ms: int = 30_000
    bookie_session_ms: int = 10_000
    # the brokers' zookeeperSessionExpiredPolicy: "reconnect" (4.0's default) or "shutdown"
    broker_session_expired: str = "reconnect"


def start_multi(
    workdir: Path,
    brokers: int,
    bookies: int,
    network: Network | None = None,
    timeouts: Timeouts = Timeouts(),  # noqa: B008 - frozen
    load_manager: str = "modular",
    autorecovery: bool = False,
    broker_settings: dict[str, str] | None = None,
) -> ClusterState:
    """Start ZooKeeper, write the cluster metadata, start the bookies and brokers, and wait
    until every broker answers. On failure every started process is stopped.

    network: run each process in its own namespace of this network (its host named like the
    process), else all on loopback. load_manager: a LOAD_MANAGERS name. autorecovery: also
    run BookKeeper's AutoRecovery (auditor and replication worker) as a process of its own.
    broker_settings: broker.conf settings added to the template's."""

    def place(name: str) -> tuple[str, str]:
        if network is None:
            return "127.0.0.1", ""
        host = network.add_host(name)
        return host.ip, host.netns

    zk_port, *ports = process.free_ports(1 + bookies + 2 * brokers + int(autorecovery))
    conf, data = workdir / "conf", workdir / "data"
    zk_host, zk_netns = place("zookeeper")
    zk_conf = launch.render(
        "zookeeper.conf", conf / "zookeeper.conf", zk_port=zk_port, data_dir=data / "zookeeper",
        host=zk_host,
    )  # fmt: skip
    zookeeper = ProcessSpec(
        name="zookeeper",
        role="zookeeper",
        argv=launch.java_command("zookeeper", workdir / "logs" / "zookeeper.log", [str(zk_conf)]),
        log=str(workdir / "logs" / "zookeeper.log"),
        out=str(workdir / "logs" / "zookeeper.out"),
        ports={"zookeeper": zk_port},
        host=zk_host,
        netns=zk_netns,
    )
    bookie_specs = []
    for i in range(1, bookies + 1):
        port, name = ports.pop(0), f"bookie-{i}"
        spec = _spec(workdir, name, "bookie", [], {"bookie": port}, place)
        path = launch.render(
            "bookie.conf", conf / f"{name}.conf", bookie_port=port, zk_port=zk_port,
            data_dir=data / name, host=spec.host, zk_host=zk_host,
            session_ms=timeouts.bookie_session_ms, interface=INNER_IF if network else "lo",
        )  # fmt: skip
        spec.argv += ["--conf", str(path)]
        bookie_specs.append(spec)
    # only when asked: the port (and the namespace) are taken only then
    recovery = (
        [_autorecovery(workdir, ports.pop(0), zk_port, zk_host, timeouts, place)]
        if autorecovery
        else []
    )
    broker_specs = []
    for i in range(1, brokers + 1):
        broker_port, web_port, name = ports.pop(0), ports.pop(0), f"broker-{i}"
        spec = _spec(workdir, name, "broker", [], {"broker": broker_port, "web": web_port}, place)
        path = launch.render(
            "broker.conf", conf / f"{name}.conf", cluster=CLUSTER_NAME, zk_port=zk_port,
            broker_port=broker_port, web_port=web_port, host=spec.host, zk_host=zk_host,
            session_ms=timeouts.broker_session_ms, load_manager=LOAD_MANAGERS[load_manager][0],
            session_expired=timeouts.broker_session_expired, default_quorum=min(2, bookies),
            shedder=LOAD_MANAGERS[load_manager][1],
        )  # fmt: skip
        with path.open("a") as conf_file:
            conf_file.writelines(
                f"{key}={value}\n" for key, value in (broker_settings or {}).items()
            )
        spec.argv += ["--broker-conf", str(path)]
        broker_specs.append(spec)
    state = ClusterState(
        kind="cluster",
        workdir=str(workdir),
        service_url="pulsar://" + ",".join(b.address("broker") for b in broker_specs),
        admin_url=f"http://{broker_specs[0].address('web')}",
        brokers=brokers,
        bookies=bookies,
        processes=[zookeeper, *bookie_specs, *recovery, *broker_specs],
        network=network.as_dict() if network else None,
    )
    process.spawn(zookeeper)
    try:
        _wait_zookeeper(zookeeper)
        _init_metadata(workdir, zookeeper, broker_specs)
    except PulsarStartError:
        stop_processes([zookeeper])
        raise
    start_and_wait(state, [*bookie_specs, *recovery, *broker_specs])
    return state


# The auditor's periodic checks, in seconds, short (BookKeeper's defaults: every ledger once a
# week, the bookies once a day): a ledger whose bookie came back empty under its old id before
# the auditor saw it gone is still found (by reading its fragments) within a run.
AUDITOR_CHECKS_S = {"auditorPeriodicCheckInterval": 30, "auditorPeriodicBookieCheckInterval": 30}


def _autorecovery(workdir: Path, port: int, zk_port: int, zk_host: str, timeouts, place):  # noqa: ANN001, ANN202
    """AutoRecoveryMain (`bin/pulsar autorecovery`) with a bookie's configuration of its own:
    its address is its id as auditor candidate and replication worker; it stores nothing."""
    spec = _spec(workdir, "autorecovery", "autorecovery", [], {"bookie": port}, place)
    path = launch.render(
        "bookie.conf", workdir / "conf" / "autorecovery.conf", bookie_port=port, zk_port=zk_port,
        data_dir=workdir / "data" / "autorecovery", host=spec.host, zk_host=zk_host,
        session_ms=timeouts.bookie_session_ms, interface=INNER_IF if spec.netns else "lo",
    )  # fmt: skip
    with path.open("a") as conf:
        conf.writelines(f"{key}={value}\n" for key, value in AUDITOR_CHECKS_S.items())
    spec.argv += ["--conf", str(path)]
    return spec


def _wait_zookeeper(spec: ProcessSpec, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not process.is_alive(spec.pid):
            break
        if _ruok(spec.host, spec.ports["zookeeper"]):
            return
        time.sleep(0.3)
    raise PulsarStartError(
        f"ZooKeeper did not start.\n--- last lines of {spec.log}:\n{process.tail(spec.log)}"
    )


def _ruok(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


def _init_metadata(workdir: Path, zookeeper: ProcessSpec, brokers: list[ProcessSpec]) -> None:
    """Write the cluster, the `public` tenant and `public/default` into ZooKeeper."""
    store = f"zk:{zookeeper.address('zookeeper')}"
    log_file = workdir / "logs" / "init-metadata.log"
    argv = launch.java_command(
        "init-metadata",
        log_file,
        [
            "--cluster", CLUSTER_NAME, "--metadata-store", store,
            "--configuration-metadata-store", store,
            "--web-service-url", ",".join(f"http://{b.address('web')}" for b in brokers),
            "--broker-service-url",
            "pulsar://" + ",".join(b.address("broker") for b in brokers),
        ],
    )  # fmt: skip
    out = workdir / "logs" / "init-metadata.out"
    with out.open("wb") as handle:
        result = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, timeout=180)
    if result.returncode != 0:
        raise PulsarStartError(
            f"initialize-cluster-metadata failed (exit {result.returncode}).\n"
            f"--- last lines of {log_file}:\n{process.tail(log_file)}\n{process.tail(out, 10)}"
        )
