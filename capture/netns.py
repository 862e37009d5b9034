"""A private network for a local cluster: one Linux network namespace per process on a bridge.

Like Jepsen and blockade, faults cut links without stopping processes: iptables DROP rules
between two hosts (partition), random packet drop (`-m statistic`, a lossy link), a token
bucket on a host's interface (a slow link), and `tc netem` delay where the kernel has it.
Every rule lives inside one of the namespaces created here, so the only possible targets are
those namespaces; deleting the namespaces at teardown removes every rule with them.

Layout: bridge `pa<id>` holds 10.A.B.1/24 (the host's side: clients and the ZooKeeper capture
reach the cluster through it); host N is namespace `pa-<id>-<name>` with `eth0` = 10.A.B.(N+2),
its veth peer `pa<id>-<N>` enslaved to the bridge. Needs root, `ip` (iproute2) and `iptables`.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import random
import secrets
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from pulsar_audit.errors import SetupError

log = logging.getLogger(__name__)

INNER_IF = "eth0"


class NetworkError(SetupError):
    """A namespace, link or rule could not be made; the message has the command and its error."""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NetworkError(f"`{' '.join(argv)}` failed ({result.returncode}): {result.stderr}")
    return result


def unavailable_reason() -> str | None:
    """Why namespaced networks cannot be made here (None when they can)."""
    if os.geteuid() != 0:
        return "network namespaces and iptables need root"
    missing = [tool for tool in ("ip", "iptables", "tc") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian packages iproute2, iptables)"
    return None


@dataclass
class Host:
    name: str
    netns: str
    ip: str
    veth: str


@dataclass
class Network:
    """The bridge, the hosts and the fault rules in force (saved with the cluster's state)."""

    net_id: str
    bridge: str
    subnet: str
    hosts: dict[str, Host] = field(default_factory=dict)
    rules: list[list[str]] = field(default_factory=list)  # [netns, chain, *match] in force
    shaped: list[str] = field(default_factory=list)  # hosts with a qdisc on eth0

    @property
    def gateway(self) -> str:
        """The bridge's address: where the host's clients come from."""
        return str(ipaddress.ip_network(self.subnet)[1])

    @classmethod
    def create(cls) -> Network:
        """A new bridge on a free 10.x.y.0/24 (fails with the reason if it cannot be made)."""
        reason = unavailable_reason()
        if reason:
            raise NetworkError(f"cannot make a namespaced network: {reason}")
        net_id = secrets.token_hex(2)
        subnet = _free_subnet()
        net = cls(net_id=net_id, bridge=f"pa{net_id}", subnet=subnet)
        _run("ip", "link", "add", net.bridge, "type", "bridge")
        try:
            _run("ip", "addr", "add", f"{net.gateway}/24", "dev", net.bridge)
            _run("ip", "link", "set", net.bridge, "up")
        except NetworkError:
            net.teardown()
            raise
        return net

    def add_host(self, name: str) -> Host:
        """A namespace with its own address on the bridge, loopback up."""
        index = len(self.hosts)
        ip = str(ipaddress.ip_network(self.subnet)[index + 2])
        host = Host(name, f"pa-{self.net_id}-{name}", ip, f"pa{self.net_id}-{index}")
        self.hosts[name] = host
        _run("ip", "netns", "add", host.netns)
        _run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", INNER_IF,
             "netns", host.netns)  # fmt: skip
        _run("ip", "link", "set", host.veth, "master", self.bridge)
        _run("ip", "link", "set", host.veth, "up")
        _run("ip", "-n", host.netns, "addr", "add", f"{ip}/24", "dev", INNER_IF)
        _run("ip", "-n", host.netns, "link", "set", INNER_IF, "up")
        _run("ip", "-n", host.netns, "link", "set", "lo", "up")
        return host

    # ---- faults
    def _add_rule(self, netns: str, chain: str, *match: str) -> None:
        _run("ip", "netns", "exec", netns, "iptables", "-A", chain, *match, "-j", "DROP")
        self.rules.append([netns, chain, *match])

    def partition(self, a: str, b: str) -> None:
        """Drop every packet between hosts `a` and `b`, both ways (the processes keep running)."""
        ha, hb = self.hosts[a], self.hosts[b]
        for here, there in ((ha, hb), (hb, ha)):
            self._add_rule(here.netns, "INPUT", "-s", there.ip)
            self._add_rule(here.netns, "OUTPUT", "-d", there.ip)

    def lossy(self, a: str, b: str, loss: float) -> None:
        """Drop a random fraction `loss` (0..1) of the packets between `a` and `b`, both ways."""
        ha, hb = self.hosts[a], self.hosts[b]
        stat = ["-m", "statistic", "--mode", "random", "--probability", f"{loss:.4f}"]
        for here, there in ((ha, hb), (hb, ha)):
            self._add_rule(here.netns, "INPUT", "-s", there.ip, *stat)

    def slow(self, name: str, rate_kbit: int) -> None:
        """Limit host `name`'s outgoing bandwidth (token bucket on its eth0)."""
        host = self.hosts[name]
        bucket = ["tbf", "rate", f"{rate_kbit}kbit", "burst", "16kbit", "latency", "500ms"]
        _run("ip", "netns", "exec", host.netns, "tc", "qdisc", "replace", "dev", INNER_IF,
             "root", *bucket)  # fmt: skip
        self.shaped.append(name)

    def delay(self, name: str, delay_ms: int) -> None:
        """Delay host `name`'s outgoing packets with netem (NetworkError if the kernel has none)."""
        host = self.hosts[name]
        _run("ip", "netns", "exec", host.netns, "tc", "qdisc", "replace", "dev", INNER_IF,
             "root", "netem", "delay", f"{delay_ms}ms")  # fmt: skip
        self.shaped.append(name)

    def heal(self) -> int:
        """Remove every fault rule and qdisc in force; returns how many were removed."""
        removed = 0
        for netns, chain, *match in self.rules:
            result = _run("ip", "netns", "exec", netns, "iptables", "-D", chain, *match,
                          "-j", "DROP", check=False)  # fmt: skip
            removed += result.returncode == 0
        self.rules.clear()
        for name in self.shaped:
            host = self.hosts[name]
            _run("ip", "netns", "exec", host.netns, "tc", "qdisc", "del", "dev", INNER_IF, "root",
                 check=False)  # fmt: skip
            removed += 1
        self.shaped.clear()
        return removed

    def teardown(self) -> None:
        """Delete the namespaces (and with them their rules and veth pairs) and the bridge.
        Call only once the processes inside are stopped."""
        for host in self.hosts.values():
            _run("ip", "link", "del", host.veth, check=False)
            _run("ip", "netns", "del", host.netns, check=False)
        _run("ip", "link", "del", self.bridge, check=False)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict) -> Network:
        hosts = {name: Host(**host) for name, host in raw.get("hosts", {}).items()}
        return cls(**{**raw, "hosts": hosts})


def _free_subnet() -> str:
    """A 10.x.y.0/24 that no interface or route of this machine uses."""
    used = _run("ip", "-4", "route", "show", "table", "all", check=False).stdout
    used += _run("ip", "-4", "addr", check=False).stdout
    for _ in range(200):
        x, y = random.randrange(100, 250), random.randrange(0, 250)
        if f"10.{x}.{y}." not in used:
            return f"10.{x}.{y}.0/24"
    raise NetworkError("no free 10.x.y.0/24 subnet found for the cluster's bridge")
