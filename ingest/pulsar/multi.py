"""Multi-process cluster on loopback: ZooKeeper, N bookies and M brokers as separate JVMs,
so that killing a broker or a bookie is a real failure of one process."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from ingest.pulsar import launch, process
from ingest.pulsar.cluster import ClusterState, PulsarStartError, start_and_wait, stop_processes
from ingest.pulsar.process import ProcessSpec

CLUSTER_NAME = "audit"


def _spec(workdir: Path, name: str, role: str, args: list[str], ports: dict) -> ProcessSpec:
    log_file = workdir / "logs" / f"{name}.log"
    return ProcessSpec(
        name=name,
        role=role,
        argv=launch.java_command(role, log_file, args),
        log=str(log_file),
        out=str(workdir / "logs" / f"{name}.out"),
        ports=ports,
    )


def start_multi(workdir: Path, brokers: int, bookies: int) -> ClusterState:
    """Start ZooKeeper, write the cluster metadata, start the bookies and brokers, and wait
    until every broker answers. On failure every started process is stopped."""
    zk_port, *ports = process.free_ports(1 + bookies + 2 * brokers)
    conf, data = workdir / "conf", workdir / "data"
    zk_conf = launch.render(
        "zookeeper.conf", conf / "zookeeper.conf", zk_port=zk_port, data_dir=data / "zookeeper"
    )
    zookeeper = _spec(workdir, "zookeeper", "zookeeper", [str(zk_conf)], {"zookeeper": zk_port})
    bookie_specs = []
    for i in range(1, bookies + 1):
        port = ports.pop(0)
        path = launch.render(
            "bookie.conf", conf / f"bookie-{i}.conf", bookie_port=port, zk_port=zk_port,
            data_dir=data / f"bookie-{i}",
        )  # fmt: skip
        bookie_specs.append(
            _spec(workdir, f"bookie-{i}", "bookie", ["--conf", str(path)], {"bookie": port})
        )
    broker_specs = []
    for i in range(1, brokers + 1):
        broker_port, web_port = ports.pop(0), ports.pop(0)
        path = launch.render(
            "broker.conf", conf / f"broker-{i}.conf", cluster=CLUSTER_NAME, zk_port=zk_port,
            broker_port=broker_port, web_port=web_port,
        )  # fmt: skip
        broker_specs.append(
            _spec(workdir, f"broker-{i}", "broker", ["--broker-conf", str(path)],
                  {"broker": broker_port, "web": web_port})
        )  # fmt: skip
    state = ClusterState(
        kind="cluster",
        workdir=str(workdir),
        service_url="pulsar://" + ",".join(f"127.0.0.1:{b.ports['broker']}" for b in broker_specs),
        admin_url=f"http://127.0.0.1:{broker_specs[0].ports['web']}",
        brokers=brokers,
        bookies=bookies,
        processes=[zookeeper, *bookie_specs, *broker_specs],
    )
    process.spawn(zookeeper)
    try:
        _wait_zookeeper(zookeeper)
        _init_metadata(workdir, zk_port, broker_specs)
    except PulsarStartError:
        stop_processes([zookeeper])
        raise
    start_and_wait(state, [*bookie_specs, *broker_specs])
    return state


def _wait_zookeeper(spec: ProcessSpec, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not process.is_alive(spec.pid):
            break
        if _ruok(spec.ports["zookeeper"]):
            return
        time.sleep(0.3)
    raise PulsarStartError(
        f"ZooKeeper did not start.\n--- last lines of {spec.log}:\n{process.tail(spec.log)}"
    )


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


def _init_metadata(workdir: Path, zk_port: int, brokers: list[ProcessSpec]) -> None:
    """Write the cluster, the `public` tenant and `public/default` into ZooKeeper."""
    store = f"zk:127.0.0.1:{zk_port}"
    log_file = workdir / "logs" / "init-metadata.log"
    argv = launch.java_command(
        "init-metadata",
        log_file,
        [
            "--cluster", CLUSTER_NAME, "--metadata-store", store,
            "--configuration-metadata-store", store,
            "--web-service-url", ",".join(f"http://127.0.0.1:{b.ports['web']}" for b in brokers),
            "--broker-service-url",
            "pulsar://" + ",".join(f"127.0.0.1:{b.ports['broker']}" for b in brokers),
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
