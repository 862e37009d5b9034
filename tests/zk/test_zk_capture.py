"""ZooKeeper capture against a real ZooKeeper (Pulsar's own jars) started by the test."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from capture.zk_capture import ZkCapture
from capture.zk_decode import decode_znode
from ingest.zk_ingest import ingest_zk
from pipelines.zk_events import zk_change_events
from pulsar_audit.paths import pulsar_lib_dir

pytestmark = pytest.mark.zookeeper

BUNDLE = "/namespace/public/default/0x40000000_0x80000000"
LEDGER = "/ledgers/00/0000/L0001"
BOOKIE = "/ledgers/available/127.0.0.1:3193"


# ---------------------------------------------------------------- protobuf bytes as BK writes them
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = b""
    while True:
        out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return out


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def ledger_metadata(state: int, last_entry: int, ensembles: list[list[str]]) -> bytes:
    """LedgerMetadataFormat v3 with the fields of a real Pulsar 4.0.7 ledger znode."""
    body = _field(1, 2) + _field(2, 2) + _field(3, 9393) + _field(4, last_entry) + _field(5, state)
    for first, ensemble in zip((0, 40), ensembles, strict=False):
        seg = b"".join(_field(1, b.encode()) for b in ensemble) + _field(2, first)
        body += _field(6, seg)
    body += _field(7, 3) + _field(8, b"") + _field(9, 2)
    body += _field(11, _field(1, b"application") + _field(2, b"pulsar"))
    return b"BookieMetadataFormatVersion\t3\n" + _varint(len(body)) + body


def bookie_info(port: int) -> bytes:
    endpoint = _field(1, b"bookie") + _field(2, port) + _field(3, b"127.0.0.1")
    return _field(6, endpoint + _field(4, b"bookie-rpc"))


def test_decode_znodes():
    raw, ledger = decode_znode(LEDGER, ledger_metadata(3, 41, [["a:1", "b:1"], ["a:1", "c:1"]]))
    assert raw.startswith("base64:Qm9va2llTWV0YWRhdGFGb3JtYXRWZXJzaW9u")  # binary kept exactly
    decoded = json.loads(ledger)
    assert (decoded["state"], decoded["last_entry_id"], decoded["segment_count"]) == (
        "CLOSED",
        41,
        2,
    )
    assert (decoded["ensemble_size"], decoded["write_quorum"], decoded["ack_quorum"]) == (2, 2, 2)
    assert decoded["segments"][1] == {"first_entry_id": 40, "ensemble": ["a:1", "c:1"]}
    assert decoded["ensemble"] == "a:1, c:1"
    assert decoded["custom_metadata"] == {"application": "pulsar"}
    open_ledger = json.loads(decode_znode(LEDGER, ledger_metadata(1, -1, [["a:1"]]))[1])
    assert (open_ledger["state"], open_ledger["last_entry_id"]) == ("OPEN", -1)
    _, info = decode_znode(BOOKIE, bookie_info(3193))
    assert json.loads(info)["endpoints"] == [
        {"host": "127.0.0.1", "id": "bookie", "port": 3193, "protocol": "bookie-rpc"}
    ]
    policies = b'{"persistence":{"bookkeeperEnsemble":2,"bookkeeperWriteQuorum":2}}'
    assert json.loads(decode_znode("/admin/policies/public/default", policies)[1])[
        "persistence"
    ] == {
        "bookkeeperEnsemble": 2,
        "bookkeeperWriteQuorum": 2,
    }
    assert decode_znode("/namespace", b"") == (None, None)


# ---------------------------------------------------------------- a real ZooKeeper
class ZooKeeperServer:
    def __init__(self, root: Path, port: int):
        self.root, self.port = root, port
        self.config = root / "zoo.cfg"
        (root / "data").mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            f"tickTime=500\ndataDir={root / 'data'}\nclientPort={port}\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok\n"
        )
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        classpath = f"{pulsar_lib_dir()}/*"
        main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        log = (self.root / "zookeeper.out").open("a")
        self.process = subprocess.Popen(
            ["java", "-Xmx128m", "-cp", classpath, main, str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited: see {self.root / 'zookeeper.out'}")
            if self._ruok():
                return
            time.sleep(0.2)
        raise RuntimeError(f"ZooKeeper not ready on port {self.port} after 60 s")

    def _ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    if not any(pulsar_lib_dir().glob("org.apache.zookeeper.zookeeper-*.jar")):
        pytest.skip(f"no ZooKeeper jar in {pulsar_lib_dir()}; run scripts/setup.sh")
    server = ZooKeeperServer(tmp_path / "zk", _free_port())
    server.start()
    yield server
    server.stop()


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_for(path: Path, expected: set[tuple[str, str]], timeout: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = _rows(path)
        if expected <= {(r["path"], r["op"]) for r in rows}:
            return rows
        time.sleep(0.2)
    seen = sorted({(r["path"], r["op"]) for r in _rows(path)})
    raise AssertionError(f"missing {sorted(expected - set(seen))}; captured {seen}")


def test_capture_records_changes_and_survives_a_restart(zookeeper, tmp_path, lakehouse, spark):
    hosts = f"127.0.0.1:{zookeeper.port}"
    out = tmp_path / "capture.zk.jsonl"
    writer = KazooClient(hosts=hosts, timeout=10)
    writer.start()
    writer.create("/ledgers/available/readonly", makepath=True)
    writer.create("/ledgers/idgen/ID-0000000001", makepath=True)
    capture = ZkCapture(hosts, out, timeout=10)
    stop = threading.Event()
    thread = threading.Thread(target=capture.run, kwargs={"stop": stop}, daemon=True)
    thread.start()
    try:
        _wait_for(out, {("/ledgers/available/readonly", "snapshot")})
        writer.create(BUNDLE, b'{"nativeUrl":"pulsar://b1:6650","disabled":false}', makepath=True)
        writer.create(LEDGER, ledger_metadata(1, -1, [["127.0.0.1:3191"]]), makepath=True)
        # one-shot watches see the latest version: space changes out as a broker does
        _wait_for(out, {(BUNDLE, "create")})
        writer.set(BUNDLE, b'{"nativeUrl":"pulsar://b1:6650","disabled":true}')
        _wait_for(out, {(BUNDLE, "change")})
        writer.delete(BUNDLE)
        _wait_for(
            out, {(BUNDLE, "create"), (BUNDLE, "change"), (BUNDLE, "delete"), (LEDGER, "create")}
        )

        zookeeper.stop()
        time.sleep(1.5)
        zookeeper.start()
        writer.create(BOOKIE, bookie_info(3193), ephemeral=True)
        writer.set(LEDGER, ledger_metadata(3, 41, [["127.0.0.1:3191"], ["127.0.0.1:3193"]]))
        rows = _wait_for(out, {("/", "resync"), (BOOKIE, "create"), (LEDGER, "change")})
    finally:
        stop.set()
        thread.join(timeout=30)
        writer.stop()
        writer.close()
    assert not thread.is_alive()

    by_key = {(r["path"], r["op"]): r for r in rows}
    assert [r["op"] for r in rows if r["path"] == BUNDLE] == ["create", "change", "delete"]
    assert json.loads(by_key[(BUNDLE, "change")]["decoded"])["disabled"] is True
    assert by_key[(BUNDLE, "change")]["version"] == 1
    assert by_key[(BOOKIE, "create")]["ephemeral_owner"] != 0
    closed = json.loads(by_key[(LEDGER, "change")]["decoded"])
    assert (closed["state"], closed["ensemble"]) == ("CLOSED", "127.0.0.1:3193")
    assert not any(r["path"].startswith("/ledgers/idgen") for r in rows)  # excluded churn
    assert len([r for r in rows if (r["path"], r["op"]) == (LEDGER, "change")]) == 1
    assert capture.resyncs >= 1

    report = ingest_zk(lakehouse, out)
    assert (report.records, report.accepted, report.quarantined) == (len(rows), len(rows), 0)
    assert ingest_zk(lakehouse, out).files == 0
    events = zk_change_events(lakehouse.read("zk_changes")).collect()
    got = sorted((e.event_type, e.bundle, e.ledger_id, e.bookie) for e in events)
    bundle = BUNDLE.removeprefix("/namespace/")
    assert got == [
        ("bookie_registered", None, None, "127.0.0.1:3193"),
        ("bundle_ownership_acquired", bundle, None, None),
        ("bundle_ownership_released", bundle, None, None),
        ("ledger_closed", None, 1, "127.0.0.1:3193"),
        ("ledger_created", None, 1, "127.0.0.1:3191"),
        ("zk_capture_resync", None, None, None),
    ]


def test_a_node_deleted_and_created_again_at_once_is_seen_both_times(zookeeper, tmp_path):
    """An unload and the broker's re-acquisition of the bundle can land before the capture
    handles the deletion's events: here both are one ZooKeeper transaction, so the node
    already exists again whenever the capture looks. It still writes delete, then create,
    once each (one deletion fires two watches, the node's data and children)."""
    hosts = f"127.0.0.1:{zookeeper.port}"
    out = tmp_path / "capture.zk.jsonl"
    writer = KazooClient(hosts=hosts, timeout=10)
    writer.start()
    writer.create(BUNDLE, b'{"nativeUrl":"pulsar://b1:6650","disabled":false}', makepath=True)
    capture = ZkCapture(hosts, out, timeout=10)
    stop = threading.Event()
    thread = threading.Thread(target=capture.run, kwargs={"stop": stop}, daemon=True)
    thread.start()

    def bundle_ops() -> list[str]:
        return [r["op"] for r in _rows(out) if r["path"] == BUNDLE]

    try:
        _wait_for(out, {(BUNDLE, "snapshot")})
        for swaps, owner in enumerate(("b2", "b3"), start=1):
            swap = writer.transaction()
            swap.delete(BUNDLE)
            swap.create(BUNDLE, f'{{"nativeUrl":"pulsar://{owner}:6650"}}'.encode())
            assert swap.commit() == [True, BUNDLE]
            deadline = time.monotonic() + 10
            while bundle_ops().count("create") < swaps:
                assert time.monotonic() < deadline, bundle_ops()
                time.sleep(0.2)
            time.sleep(0.5)  # the second watch's event and the parent's come after
    finally:
        stop.set()
        thread.join(timeout=30)
        writer.stop()
        writer.close()
    assert bundle_ops() == ["snapshot", "delete", "create", "delete", "create"]
    [last] = [r for r in _rows(out) if r["path"] == BUNDLE][-1:]
    assert json.loads(last["decoded"])["nativeUrl"] == "pulsar://b3:6650"
