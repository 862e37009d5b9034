"""`watch`'s warm-up: its own micro-batches run over a small made-up run, in a scratch
lakehouse, while the landing folder is still empty (issue 29).

A watch's first micro-batches are its slowest: the JVM interprets Spark's, Delta's and the
watch's code paths until it has compiled them. Measured here (docs/live.md, "Session 63"), the
micro-batches of a watch's first trace took 19.2, 8.9, 7.0, 9.9, 9.0 and 7.3 s; after three
micro-batches over another run in the same process, 5.5, 5.2, 4.4, 5.3, 5.1 and 4.4 s. So
before its query starts, a watch whose landing folder holds no input yet (it was started before
the run, as `--watch` and the latency benchmark start it) takes a made-up run's micro-batches — its
trace cut into three files, the broker's log of an unload and a ZooKeeper capture of the
bundle's ownership beside the second, the capture's next rows beside the third — through the
same `Watch.on_batch` (ingest of traces and logs, the infrastructure timeline, fold,
judgement, causes, alerts to a file sink)
into a lakehouse of its own under the system's temporary folder, removed afterwards. It stops
as soon as an input file lands (that file waits for one warm-up micro-batch at most), and is
skipped when the folder holds input already (a restart, `--once` on a written run), on a
cluster (its executors are other JVMs) and with config `watch.warm_up: false`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ingest.logs import LOG_SUFFIXES
from ingest.traces import TRACE_SUFFIXES
from pulsar_audit.config import Config, FileSinkConfig, SinkConfig
from pulsar_audit.storage import local_form

WARM_UP_RUN = "pulsar-audit-warm-up"
T0_MS = 946_684_800_000  # 2000-01-01: no real run's time
SEND_INTERVAL_MS, ACK_MS, RECEIVE_MS = 5, 2, 3
MESSAGES = 600
LOST = 100  # acked, never delivered: a suspected loss in the second micro-batch
REDELIVERED = 450  # delivered twice
OUTAGE_FROM, OUTAGE_MS = 300, 900  # no completion from seq 300's send for 900 ms: an outage
CHUNK_MS, CHUNKS = 1000, 3  # a micro-batch per second of the run, the outage open in the 2nd
TOPIC = "persistent://public/default/warm-up"
ALERTS_FILE = "alerts.jsonl"  # the scratch lakehouse's one alert sink
# The broker's log, taken in with the second micro-batch's trace: the unload of the topic's
# bundle asked for 10 ms before the acks stop, begun 2 ms later; the ZooKeeper capture of its
# ownership node: owned, deleted by the unload, owned again (third micro-batch) as they resume
BUNDLE = "public/default/0x00000000_0xffffffff"
UNLOAD_AT_MS = OUTAGE_FROM * SEND_INTERVAL_MS - 10
LOG_BATCH = 1
OWNER = 72057594037927936  # the broker's ZooKeeper session: the ownership node is ephemeral
ZK_CHANGES = (  # (micro-batch, ms, op, owning broker)
    (LOG_BATCH, -900, "create", "10.0.0.11"),
    (LOG_BATCH, UNLOAD_AT_MS + 5, "delete", None),
    (LOG_BATCH + 1, OUTAGE_FROM * SEND_INTERVAL_MS + OUTAGE_MS - 10, "create", "10.0.0.12"),
)
BROKER_LINES = (
    (-900, "metadata-store-22-1", "org.apache.pulsar.broker.namespace.OwnershipCache",
     f"Successfully acquired ownership of OwnedBundle(bundle={BUNDLE}, isActive=1)"),
    (UNLOAD_AT_MS, "pulsar-web-49-1", "org.apache.pulsar.broker.admin.impl.NamespacesBase",
     f"[null] Unloading namespace bundle {BUNDLE}"),
    (UNLOAD_AT_MS + 2, "metadata-store-22-1", "org.apache.pulsar.broker.namespace.OwnedBundle",
     f"Disabling ownership: {BUNDLE}"),
)  # fmt: skip


@dataclass
class WarmedUp:
    """What a warm-up did: its micro-batches, the alerts they sent to its file sink (kind and
    the first cause's event type, or None), its seconds."""

    batches: int = 0
    alerts: list[tuple[str, str | None]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def warm_up_events() -> list[dict[str, Any]]:
    """The made-up run's events (a harness config, a producer p1, a Reader), in time order."""
    base = {"run_id": WARM_UP_RUN, "topic": TOPIC}
    events: list[dict[str, Any]] = [
        {**base, "role": "run", "client": "harness", "event": "config", "ts": T0_MS - 1000,
         "ensemble_size": 2, "write_quorum": 2, "ack_quorum": 1, "brokers": 1, "bookies": 2,
         "deduplication": False, "scenario": "warm-up"},
    ]  # fmt: skip
    producer = {**base, "role": "producer", "client": "p1", "partition": -1}
    reader = {**base, "role": "consumer", "client": "reader", "partition": -1,
              "subscription": "reader", "producer": "p1"}  # fmt: skip
    held_until = T0_MS + OUTAGE_FROM * SEND_INTERVAL_MS + OUTAGE_MS
    for seq in range(MESSAGES):
        sent = T0_MS + seq * SEND_INTERVAL_MS
        acked = held_until if seq >= OUTAGE_FROM and sent < held_until else sent + ACK_MS
        stored = {"ledger_id": 1, "entry_id": seq}
        events.append({**producer, "event": "send", "seq": seq, "ts": sent})
        events.append({**producer, "event": "ack", "seq": seq, "ts": acked, **stored,
                       "batch_index": -1})  # fmt: skip
        if seq != LOST:
            for copy in range(2 if seq == REDELIVERED else 1):
                received = acked + RECEIVE_MS + copy
                events.append({**reader, "event": "receive", "seq": seq, "ts": received, **stored})
    events.sort(key=lambda e: (e["ts"], e["role"] != "producer", e["event"] != "send"))
    for role in ("producer", "consumer"):
        for index, event in enumerate(e for e in events if e["role"] == role):
            event["event_index"] = index
    return events


def broker_log_lines() -> list[str]:
    """The broker's log of the made-up run: its bundle's unload asked for just before the acks
    stop (a real standalone's layout and messages, pipelines/log_patterns.py), so that the
    outage's cause is ranked from the infrastructure timeline as a real run's is."""
    lines = []
    for at_ms, thread, logger, message in BROKER_LINES:
        at = datetime.fromtimestamp((T0_MS + at_ms) / 1000, UTC)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%S,") + f"{at.microsecond // 1000:03d}+0000"
        lines.append(f"{stamp} [{thread}] INFO  {logger} - {message}")
    return lines


def write_warm_up_run(landing: Path) -> list[list[Path]]:
    """The run's files, per micro-batch in order: its events cut by trace time into one trace
    file each, the broker's log beside the second (where the outage begins)."""
    chunks: dict[int, list[str]] = {}
    for event in warm_up_events():
        chunk = min(max(0, (event["ts"] - T0_MS) // CHUNK_MS), CHUNKS - 1)
        chunks.setdefault(chunk, []).append(json.dumps(event))
    landing.mkdir(parents=True, exist_ok=True)
    batches = []
    for number in sorted(chunks):
        path = landing / f"trace-{WARM_UP_RUN}-{number:05d}.jsonl"
        path.write_text("\n".join(chunks[number]) + "\n")
        batches.append([path])
    log = landing / "logs" / "broker" / "standalone.00000.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(broker_log_lines()) + "\n")
    batches[LOG_BATCH].append(log)
    for batch, rows in sorted(zk_rows().items()):
        capture = landing / f"cluster.{batch:05d}.zk.jsonl"
        capture.write_text("".join(json.dumps(row) + "\n" for row in rows))
        batches[batch].append(capture)
    return batches


def zk_rows() -> dict[int, list[dict[str, Any]]]:
    """The ZooKeeper capture of the bundle's ownership node, per micro-batch that takes it in:
    owned, deleted by the unload (with the log, in the second), owned again as the acks
    resume (in the third); a real capture's rows (capture/zk_capture.py)."""
    rows: dict[int, list[dict[str, Any]]] = {}
    for batch, at_ms, op, broker in ZK_CHANGES:
        at = datetime.fromtimestamp((T0_MS + at_ms) / 1000, UTC).isoformat(timespec="milliseconds")
        data = json.dumps({"nativeUrl": f"pulsar://{broker}:6650"}) if broker else None
        rows.setdefault(batch, []).append(
            {
                "ts": at,
                "zookeeper": "zk-0.warm-up:2181",
                "path": f"/namespace/{BUNDLE}",
                "op": op,
                "version": 0,
                "ephemeral_owner": OWNER if broker else 0,
                "data": data,
                "decoded": data,
                "capture_id": WARM_UP_RUN,
                "observed_at": at,
            }  # fmt: skip
        )
    return rows


def has_input(path: str) -> bool:
    """Whether the landing folder holds a file the watch's stream would take (its names, not
    below a folder whose name begins with `_` or `.`); a folder that is not local: assumed."""
    local = local_form(path)
    if local is None:
        return True
    suffixes = (*TRACE_SUFFIXES, *LOG_SUFFIXES)
    for _, folders, files in os.walk(local):
        folders[:] = [f for f in folders if not f.startswith(("_", "."))]
        if any(f.endswith(suffixes) and not f.startswith(("_", ".")) for f in files):
            return True
    return False


def warms_up(config: Config) -> bool:
    """Whether this config's watch warms up: asked for, Spark local, tables as paths."""
    local = config.spark.master.startswith("local")
    return config.watch.warm_up and local and config.storage == "path"


def scratch_config(config: Config, root: Path) -> Config:
    """`config` with its lakehouse under `root` and one alert sink, a file there."""
    sink = SinkConfig(name="warm-up", file=FileSinkConfig(path=str(root / ALERTS_FILE)))
    alerts = dataclasses.replace(config.alerts, sinks=[sink])
    return dataclasses.replace(config, lakehouse=str(root / "lakehouse"), alerts=alerts)


def sent_alerts(root: Path) -> list[tuple[str, str | None]]:
    """The alerts a warm-up in `root` sent to its file sink: (kind, the first cause's event
    type or None), sorted."""
    path = root / ALERTS_FILE
    lines = path.read_text().splitlines() if path.exists() else []
    alerts = [json.loads(line) for line in lines if line.strip()]
    return sorted((a["kind"], (a.get("causes") or [{}])[0].get("event_type")) for a in alerts)
