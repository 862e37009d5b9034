"""The run's infrastructure story as the cluster would have logged it: broker, bookie and C++
client log lines in the real Pulsar 4.0.7 layouts and texts, and ZooKeeper changes as a
`*.zk.jsonl` capture. Few events (faults, ownership, ledgers): built on the driver.

Texts are the ones `pipelines/log_patterns.py` recognizes, seen in the 4.0.7 logs under
tests/fixtures/logs; layouts are pulsar-log-facts.md §A.1 (broker, and bookies run by
`bin/pulsar bookie`) and §A.3 (C++ client).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simulate.plan import BUNDLE_RANGE, NAMESPACE, Plan
from simulate.scenario import Scenario

BUNDLE = f"{NAMESPACE}/{BUNDLE_RANGE}"  # the first of the namespace's 4 bundles
BOUNDARIES = ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]
ZOOKEEPER = "zk-0:2181"  # a capture's ensemble before write_infra names it for its run
CLUSTER = "audit"  # the cluster name, as the local multi-process cluster's (pulsar/multi.py)
LOGGERS = {
    "OwnershipCache": "org.apache.pulsar.broker.namespace.OwnershipCache",
    "OwnedBundle": "org.apache.pulsar.broker.namespace.OwnedBundle",
    "NamespacesBase": "org.apache.pulsar.broker.admin.impl.NamespacesBase",
    "BrokerService": "org.apache.pulsar.broker.service.BrokerService",
    "PersistentTopic": "org.apache.pulsar.broker.service.persistent.PersistentTopic",
    "ManagedLedgerImpl": "org.apache.bookkeeper.mledger.impl.ManagedLedgerImpl",
    "LedgerCreateOp": "org.apache.bookkeeper.client.LedgerCreateOp",
    "LedgerHandle": "org.apache.bookkeeper.client.LedgerHandle",
    "ReadOnlyLedgerHandle": "org.apache.bookkeeper.client.ReadOnlyLedgerHandle",
    "PendingAddOp": "org.apache.bookkeeper.client.PendingAddOp",
    "ReadEntryProcessor": "org.apache.bookkeeper.proto.ReadEntryProcessor",
    "PulsarRegistrationClient": "org.apache.pulsar.metadata.bookkeeper.PulsarRegistrationClient",
    "LockManagerImpl": "org.apache.pulsar.metadata.coordination.impl.LockManagerImpl",
    "ZKSessionWatcher": "org.apache.pulsar.metadata.impl.ZKSessionWatcher",
    "PulsarService": "org.apache.pulsar.broker.PulsarService",
    "ServiceUnitStateChannelImpl": "org.apache.pulsar.broker.loadbalance.extensions.channel."
    "ServiceUnitStateChannelImpl",
    "Auditor": "org.apache.bookkeeper.replication.Auditor",
    "ReplicationWorker": "org.apache.bookkeeper.replication.ReplicationWorker",
    "MessageDeduplication": "org.apache.pulsar.broker.service.persistent.MessageDeduplication",
    "ZooKeeperWatcherBase": "org.apache.bookkeeper.zookeeper.ZooKeeperWatcherBase",
}
THREADS = {
    "broker": "metadata-store-10-1",
    "bk": "BookKeeperClientWorker-OrderedExecutor-0-0",
    "bookie": "BookieHighPriorityThread-OrderedExecutor-0-0",
}


@dataclass(frozen=True)
class Line:
    ts_us: int
    source: str  # broker | bookie | client
    host: str  # the process: broker-0, bookie-1, client
    level: str
    logger: str  # simple class name (a LOGGERS key) or the C++ file:line
    message: str


def server_line(line: Line) -> str:
    """%d{ISO8601_OFFSET_DATE_TIME_HHMM} [%t] %-5level %logger{36} - %msg."""
    stamp = datetime.fromtimestamp(line.ts_us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S,%f")[:-3]
    thread = THREADS["bookie" if line.source == "bookie" else "broker"]
    if line.logger in (
        "LedgerCreateOp",
        "LedgerHandle",
        "ReadOnlyLedgerHandle",
        "PendingAddOp",
        "ManagedLedgerImpl",
    ):
        thread = THREADS["bk"]
    return f"{stamp}+0000 [{thread}] {line.level:<5} {LOGGERS[line.logger]} - {line.message}"


def client_line(line: Line) -> str:
    """C++ SimpleLogger: local time, level, thread id, File:line | message."""
    stamp = datetime.fromtimestamp(line.ts_us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return f"{stamp} {line.level:<5} [140646827947712] {line.logger} | {line.message}"


def _bookie(name: str) -> str:
    return f"{name}:3181"


def _broker_addr(name: str) -> str:
    return f"10.0.0.{11 + int(name.split('-')[1])}"


def managed_ledger(plan: Plan, stream: int) -> str:
    s = plan.scenario
    local = s.topic.split("/")[-1] + (f"-partition-{stream}" if s.partitions else "")
    return f"public/default/persistent/{local}"


def topic_name(plan: Plan, stream: int) -> str:
    s = plan.scenario
    return s.topic + (f"-partition-{stream}" if s.partitions else "")


def zookeeper_of(run_id: str) -> str:
    """The ZooKeeper ensemble a run's capture names: each simulated run is its own cluster
    (its own bookies, brokers and E/Qw/Qa), so a sweep's captures must not read as one
    ensemble's history (`risk score` takes the newest capture per ensemble; zk_events follows
    a znode per ensemble and path)."""
    return f"zk-0.{run_id}:2181"


def zk_row(
    ts_us: int,
    path: str,
    op: str,
    decoded: dict[str, Any] | None = None,
    version: int = 0,
    ephemeral: bool = False,
    compact: bool = False,
) -> dict[str, Any]:
    """One line of a `*.zk.jsonl` capture, as capture/zk_capture.py writes it (capture_id: set
    per run by write_infra). compact: the znode's JSON as Pulsar writes it (no spaces)."""
    stamp = datetime.fromtimestamp(ts_us / 1e6, UTC).isoformat(timespec="milliseconds")
    separators = (",", ":") if compact else None
    return {
        "ts": stamp,
        "zookeeper": ZOOKEEPER,
        "path": path,
        "op": op,
        "version": version,
        "ephemeral_owner": 72_057_594_037_927_936 if ephemeral else 0,
        "data": None if decoded is None else json.dumps(decoded, separators=separators),
        "decoded": None
        if decoded is None
        else json.dumps(decoded, sort_keys=True, separators=separators),
        "capture_id": "simulated",
        "observed_at": stamp,
    }


def namespace_policies(s: Scenario) -> dict[str, Any]:
    """The namespace's policies znode as Pulsar 4.0 stores it (key order included) after the
    harness set its persistence (E/Qw/Qa), infinite retention and deduplication."""
    return {
        "auth_policies": {
            "namespace_auth": {},
            "destination_auth": {},
            "subscription_auth_roles": {},
        },
        "replication_clusters": [CLUSTER],
        "allowed_clusters": [],
        "bundles": {"boundaries": BOUNDARIES, "numBundles": len(BOUNDARIES) - 1},
        "backlog_quota_map": {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "persistence": {
            "bookkeeperEnsemble": s.ensemble,
            "bookkeeperWriteQuorum": s.write_quorum,
            "bookkeeperAckQuorum": s.ack_quorum,
            "managedLedgerMaxMarkDeleteRate": 0.0,
        },
        "deduplicationEnabled": s.dedup,
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "offload_threshold": -1,
        "offload_threshold_in_seconds": -1,
        "schema_compatibility_strategy": "UNDEFINED",
        "schema_validation_enforced": False,
        "subscription_types_enabled": [],
        "properties": {},
        "migrated": False,
    }


def policy_snapshot(s: Scenario, ts_us: int) -> list[dict[str, Any]]:
    """The capture opens with a snapshot of the tenant's and the namespace's policies."""
    namespace = namespace_of(s.topic)
    tenant = {"allowedClusters": [CLUSTER], "adminRoles": []}
    return [
        zk_row(
            ts_us, f"/admin/policies/{namespace.split('/')[0]}", "snapshot", tenant, compact=True
        ),
        # version 3: created, then the harness set persistence, retention and deduplication
        zk_row(
            ts_us,
            f"/admin/policies/{namespace}",
            "snapshot",
            namespace_policies(s),
            version=3,
            compact=True,
        ),
    ]


def namespace_of(topic: str) -> str:
    """persistent://public/default/sim → public/default."""
    return "/".join(topic.split("://", 1)[-1].split("/")[:2])


def ledger_path(ledger_id: int) -> str:
    """BookKeeper's hierarchical ledger path: /ledgers/00/0000/L0010."""
    digits = f"{ledger_id:010d}"
    return f"/ledgers/{digits[:2]}/{digits[2:6]}/L{digits[6:]}"


def under_replicated_path(ledger_id: int) -> str:
    digits = f"{ledger_id:016x}"
    return (
        "/ledgers/underreplication/ledgers/"
        + "/".join(digits[i : i + 4] for i in range(0, 16, 4))
        + f"/urL{ledger_id}"
    )


def write_infra(
    plan: Plan, lines: list[Line], zk: list[dict[str, Any]], out: Path
) -> dict[str, int]:
    """logs/<source>/<host>.log files and cluster.zk.jsonl under `out`; returns line counts."""
    counts: dict[str, int] = {}
    by_file: dict[Path, list[Line]] = {}
    for line in lines:
        by_file.setdefault(out / "logs" / line.source / f"{line.host}.log", []).append(line)
    for path, these in by_file.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        render = client_line if these[0].source == "client" else server_line
        path.write_text("".join(render(x) + "\n" for x in sorted(these, key=lambda x: x.ts_us)))
        counts[str(path.relative_to(out))] = len(these)
    zk_file = out / "cluster.zk.jsonl"
    capture = f"simulated-{plan.scenario.run_id}"  # one capture per run, as the harness makes
    rows = sorted(zk, key=lambda r: r["ts"])
    named = {"capture_id": capture, "zookeeper": zookeeper_of(plan.scenario.run_id)}
    zk_file.write_text("".join(json.dumps({**r, **named}) + "\n" for r in rows))
    counts[zk_file.name] = len(zk)
    return counts


class Story:
    """Collects log lines and ZooKeeper rows."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.lines: list[Line] = []
        self.zk: list[dict[str, Any]] = []

    def log(
        self, ts: int, source: str, host: str, logger: str, message: str, level: str = "INFO"
    ) -> None:
        self.lines.append(Line(ts, source, host, level, logger, message))

    def broker(self, ts: int, host: str, logger: str, message: str, level: str = "INFO") -> None:
        self.log(ts, "broker", host, logger, message, level)
