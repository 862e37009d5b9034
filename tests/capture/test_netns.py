"""Real network namespaces on a private bridge: a partition cuts one link, heal restores it,
teardown leaves nothing behind (no Pulsar needed: a TCP echo server in a namespace)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from capture import netns
from capture.netns import Network

pytestmark = pytest.mark.skipif(
    netns.unavailable_reason() is not None, reason=str(netns.unavailable_reason())
)

SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000)); s.listen(16); print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()
"""
CLIENT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], 7000), timeout=2) as c:
        print(c.recv(2).decode())
except OSError as e:
    print("cut", type(e).__name__)
"""


def exec_prefix(net: Network, name: str) -> list[str]:
    """The argv prefix that runs a command inside host `name`'s namespace."""
    return ["ip", "netns", "exec", net.hosts[name].netns]


def _connect_from(net: Network, host: str | None, ip: str) -> str:
    prefix = exec_prefix(net, host) if host else []
    result = subprocess.run(
        [*prefix, sys.executable, "-c", CLIENT, ip], capture_output=True, text=True, timeout=20
    )
    return result.stdout.strip()


@pytest.fixture
def network():
    net = Network.create()
    server = None
    try:
        a, b = net.add_host("a"), net.add_host("b")
        server = subprocess.Popen(
            [*exec_prefix(net, "a"), sys.executable, "-c", SERVER, a.ip],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout.readline().strip() == "ready"
        yield net, a, b
    finally:
        if server:
            server.kill()
            server.wait(10)
        net.teardown()


def test_partition_cuts_one_link_and_heal_restores_it(network) -> None:
    net, a, b = network
    assert _connect_from(net, "b", a.ip) == "hi"
    assert _connect_from(net, None, a.ip) == "hi"  # the machine reaches it through the bridge

    net.partition("a", "b")
    assert _connect_from(net, "b", a.ip) == "cut TimeoutError"
    assert _connect_from(net, None, a.ip) == "hi"  # only the a-b link is cut

    net.lossy("a", "b", 0.5)
    rules = subprocess.run(
        [*exec_prefix(net, "a"), "iptables", "-S", "INPUT"], capture_output=True, text=True
    ).stdout
    assert f"-s {b.ip}/32 -m statistic --mode random --probability 0.5" in rules

    assert net.heal() == 6  # 4 partition rules + 2 loss rules
    assert _connect_from(net, "b", a.ip) == "hi"


def test_teardown_removes_namespaces_links_and_rules() -> None:
    net = Network.create()
    try:
        host = net.add_host("x")
        net.partition("x", net.add_host("y").name)
    finally:
        net.teardown()
    time.sleep(0.2)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert host.netns not in namespaces
    assert net.bridge not in links and host.veth not in links
