"""Watch Pulsar's metadata in ZooKeeper and write every create / change / delete as JSONL.

No Spark here: capture runs beside a live cluster and must not lose events, so each row is
written, flushed and fsync'd as it is seen; `pulsar-audit ingest zk` loads the files later.

How nothing is missed: one-shot ZooKeeper watches on every node's data and children
(kazoo delivers them to a queue; the capture thread re-reads the node and sets the next
watch). Every row is a diff against the capture's own copy of the tree, so a change seen
twice is written once; a node whose creation zxid differs from the one known is a new node
(deleted and created again between two looks: a delete row, then a create row). When the
connection comes back after a ZooKeeper restart or a lost session, a `resync` row is written
and the whole tree is walked again and diffed: changes made while disconnected appear as
create / change / delete (with the znode's own ctime or mtime as ts); only nodes created and
deleted within the gap stay invisible.

Row fields: ts (ISO-8601 UTC), zookeeper, path, op (snapshot | create | change | delete |
resync), version, ephemeral_owner, data, decoded, capture_id, observed_at. `snapshot` rows
are the tree as found when the capture (or a dump) started.

Rolling (`roll_s`, when `watch` takes the capture during the run): the rows go to segments
<stem>-NNNNN.zk.jsonl instead of one file, each rolled into place whole every `roll_s` seconds
that it holds rows (capture/spool.py; every row still fsync'd as it is written).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

from capture.spool import Spool
from capture.zk_decode import decode_znode

log = logging.getLogger(__name__)

DEFAULT_ROOTS = (
    "/namespace",
    "/managed-ledgers",
    "/ledgers",
    "/admin/policies",
    "/loadbalance/brokers",
)
# BookKeeper's ledger-id generator creates and deletes a sequential node per new ledger.
DEFAULT_EXCLUDE = ("/ledgers/idgen",)
ZK_SUFFIX = ".zk.jsonl"  # what `ingest zk` takes (ingest/zk_ingest.py ZK_SUFFIXES)


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="milliseconds")


class JsonlWriter:
    """Append-only JSONL file; every row is flushed and fsync'd before write() returns."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.rows = 0

    def write(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())
            self.rows += 1

    def close(self) -> None:
        self._file.close()


class ZkCapture:
    """Capture of Pulsar's znodes under `roots` from the ensemble `hosts` into `out`."""

    def __init__(
        self,
        hosts: str,
        out: str | Path,
        roots: tuple[str, ...] = DEFAULT_ROOTS,
        exclude: tuple[str, ...] = DEFAULT_EXCLUDE,
        timeout: float = 10.0,
        roll_s: float | None = None,
    ):
        self.hosts, self.roots, self.exclude = hosts, roots, exclude
        self.capture_id = str(uuid.uuid4())
        self.writer: JsonlWriter | Spool
        if roll_s:  # for `watch`: whole segments <stem>-NNNNN.zk.jsonl rolled into place
            out = Path(out)
            stem = out.name.removesuffix(ZK_SUFFIX)
            self.writer = Spool(
                out.parent, prefix=stem, sync_events=1, roll_s=roll_s, suffix=ZK_SUFFIX
            )
        else:
            self.writer = JsonlWriter(out)
        self.zk = KazooClient(
            hosts=hosts, timeout=timeout, connection_retry={"max_tries": -1, "max_delay": 2}
        )
        self.versions: dict[str, int] = {}
        self.created: dict[str, int] = {}  # czxid: which incarnation of the node
        self.children: dict[str, set[str]] = {}
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._was_disconnected = False
        self._initial = True
        self.resyncs = 0

    # ------------------------------------------------------------------ kazoo callbacks
    def _on_data(self, event: WatchedEvent) -> None:
        self.events.put(("data", event))

    def _on_children(self, event: WatchedEvent) -> None:
        self.events.put(("children", event))

    def _on_state(self, state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._was_disconnected = True
        elif state == KazooState.CONNECTED and self._was_disconnected:
            self._was_disconnected = False
            self.events.put(("resync", state))

    # ------------------------------------------------------------------ rows
    def _row(self, path: str, op: str, stat: ZnodeStat | None, data: bytes | None) -> None:
        now = time.time()
        ts = now
        if stat is not None and op in ("create", "change"):
            ts = (stat.ctime if op == "create" else stat.mtime) / 1000.0
        raw, decoded = decode_znode(path, data)
        self.writer.write(
            {
                "ts": _iso(ts),
                "zookeeper": self.hosts,
                "path": path,
                "op": op,
                "version": stat.version if stat else None,
                "ephemeral_owner": stat.ephemeralOwner if stat else None,
                "data": raw,
                "decoded": decoded,
                "capture_id": self.capture_id,
                "observed_at": _iso(now),
            }
        )

    def _excluded(self, path: str) -> bool:
        return any(path == e or path.startswith(e + "/") for e in self.exclude)

    def _record(self, path: str, data: bytes, stat: ZnodeStat) -> None:
        known = self.versions.get(path)
        if known is not None and self.created[path] != stat.czxid:
            self._forget(path)  # deleted and created again since it was last read
            known = None
        if known is None:
            self._row(path, "snapshot" if self._initial else "create", stat, data)
        elif known != stat.version:
            self._row(path, "change", stat, data)
        self.versions[path] = stat.version
        self.created[path] = stat.czxid

    def _forget(self, path: str) -> None:
        """Write `delete` for `path` and whatever is still known below it (children first)."""
        below = sorted((p for p in self.versions if p.startswith(path + "/")), reverse=True)
        for p in [*below, path]:
            if self.versions.pop(p, None) is not None:
                self._row(p, "delete", None, None)
            self.created.pop(p, None)
            self.children.pop(p, None)

    def _gone(self, path: str) -> None:
        """`path` no longer exists. Its name also leaves the parent's known children, so the
        parent's next child event sees the node as new if it is created again before that
        event is handled."""
        self._forget(path)
        if path in self.roots:
            self.zk.exists(path, watch=self._on_data)
        else:
            parent, _, name = path.rpartition("/")
            self.children.get(parent or "/", set()).discard(name)

    # ------------------------------------------------------------------ tree walking
    def _visit(self, path: str, seen: set[str] | None = None) -> None:
        """Read `path` and everything below it, setting watches; record what differs."""
        stack = [path]
        while stack:
            p = stack.pop()
            if self._excluded(p):
                continue
            try:
                data, stat = self.zk.get(p, watch=self._on_data)
                kids = set(self.zk.get_children(p, watch=self._on_children))
            except NoNodeError:
                self._gone(p)
                continue
            self._record(p, data, stat)
            if seen is not None:
                seen.add(p)
            for gone in self.children.get(p, set()) - kids:
                self._gone(_join(p, gone))
            self.children[p] = kids
            stack.extend(_join(p, k) for k in sorted(kids, reverse=True))

    def _refresh_children(self, path: str) -> None:
        try:
            kids = set(self.zk.get_children(path, watch=self._on_children))
        except NoNodeError:
            self._gone(path)
            return
        before = self.children.get(path, set())
        self.children[path] = kids
        for gone in before - kids:
            self._gone(_join(path, gone))
        for new in sorted(kids - before):
            self._visit(_join(path, new))

    def _refresh_data(self, path: str) -> None:
        try:
            data, stat = self.zk.get(path, watch=self._on_data)
        except NoNodeError:
            self._gone(path)
            return
        self._record(path, data, stat)

    def resync(self) -> None:
        """Walk every root again and diff against what is known (after a reconnect)."""
        self.resyncs += 1
        self._row("/", "resync", None, json.dumps({"reason": "reconnected"}).encode())
        seen: set[str] = set()
        for root in self.roots:
            if self.zk.exists(root, watch=self._on_data):
                self._visit(root, seen)
        for path in sorted(set(self.versions) - seen, reverse=True):
            if path in self.versions:
                self._gone(path)

    def _handle(self, kind: str, event: Any) -> None:
        if kind == "resync":
            self.resync()
        elif event.type == EventType.DELETED:
            # read, not assumed: the node may exist again (a new czxid) by now, and one
            # deletion comes as two events (the node's data and child watches)
            self._visit(event.path)
        elif event.type == EventType.CREATED:
            self._visit(event.path)
        elif event.type == EventType.CHANGED:
            self._refresh_data(event.path)
        elif event.type == EventType.CHILD:
            self._refresh_children(event.path)
        # EventType.NONE: the session ended; the resync on reconnect covers it

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        self.zk.add_listener(self._on_state)
        self.zk.start()
        for root in self.roots:
            if self.zk.exists(root, watch=self._on_data):
                self._visit(root)
        self._initial = False

    def run(self, duration: float | None = None, stop: threading.Event | None = None) -> int:
        """Capture until `duration` seconds pass or `stop` is set; return rows written."""
        stop = stop or threading.Event()
        deadline = None if duration is None else time.monotonic() + duration
        self.start()
        try:
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                try:
                    kind, event = self.events.get(timeout=0.2)
                except queue.Empty:
                    continue
                try:
                    self._handle(kind, event)
                except Exception:  # noqa: BLE001 - a lost connection mid-read: resync later
                    log.warning("zk capture: %s event failed; will resync", kind, exc_info=True)
                    self._was_disconnected = True
        finally:
            self.close()
        return self.writer.rows

    def close(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        finally:
            self.writer.close()


def _join(parent: str, child: str) -> str:
    return f"{parent.rstrip('/')}/{child}"


def dump(hosts: str, out: str | Path, roots: tuple[str, ...] = DEFAULT_ROOTS) -> int:
    """Write the current tree under `roots` as `snapshot` rows (a saved dump); return rows."""
    capture = ZkCapture(hosts, out, roots)
    try:
        capture.zk.start()
        for root in roots:
            if capture.zk.exists(root):
                capture._visit(root)
        return capture.writer.rows
    finally:
        capture.close()
