"""Capture one run as a trace (format v1): produce N messages, read them back, maybe inject chaos.

The producer keeps at most `in_flight` messages pending (block_if_queue_full) and records each
send, ack and nack with its MessageId and time; seq travels as the message's sequence_id and
as its `seq` property. Then a Reader reads the topic from the earliest message to the end
(emitting `end`), or a subscription consumer drains it. Every event goes through the
crash-safe spool; the broker/bookie log lines written during the run are copied to <out>/logs.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pulsar

from capture import chaos, runlogs
from capture.admin import Admin, TopicName
from capture.consume import drain_reader, drain_subscription
from capture.processes import ClusterState
from capture.recorder import Recorder
from capture.spool import Spool
from capture.zk_capture import ZkCapture
from pulsar_audit.errors import UsageError
from pulsar_audit.secrets import PulsarAuth

log = logging.getLogger(__name__)


@dataclass
class CaptureOptions:
    service_url: str
    admin_url: str
    topic: str
    messages: int
    out: Path
    in_flight: int = 10_000
    config: tuple[int, int, int] = (1, 1, 1)
    chaos: chaos.ChaosSpec | None = None
    consumer: str = "reader"
    deduplication: bool = False
    scenario: str = "control"
    payload_bytes: int = 100
    rate: float = 0.0  # sends per second (0: as fast as in_flight allows)
    run_id: str = field(default_factory=lambda: new_run_id("capture"))


def new_run_id(scenario: str) -> str:
    return f"{scenario}-{datetime.now(UTC):%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"


def parse_config(text: str) -> tuple[int, int, int]:
    """E-Qw-Qa, e.g. 3-2-2, with E >= Qw >= Qa >= 1."""
    parts = text.split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise UsageError(f"--config {text!r}: expected E-Qw-Qa, e.g. 2-2-2")
    e, qw, qa = map(int, parts)
    if not e >= qw >= qa >= 1:
        raise UsageError(f"--config {text!r}: need ensemble >= write quorum >= ack quorum >= 1")
    return e, qw, qa


def capture(opts: CaptureOptions, state: ClusterState | None = None) -> dict:
    """Run the capture; returns a summary (also written to <out>/capture.json)."""
    if opts.chaos:
        chaos.check_possible(opts.chaos, state)
    topic = TopicName.parse(opts.topic)
    admin = Admin(opts.admin_url)
    admin.set_infinite_retention(topic)  # else acknowledged ledgers may go before the read-back
    admin.set_persistence(topic, *opts.config)
    admin.set_deduplication(topic, opts.deduplication)
    (opts.out / "logs" / "client").mkdir(parents=True, exist_ok=True)
    marks = runlogs.mark(state)
    client = pulsar.Client(
        opts.service_url,
        **PulsarAuth.from_env().client_options(),
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(
            pulsar.LoggerLevel.Info, str(opts.out / "logs" / "client" / "client.log")
        ),
    )
    spool = Spool(opts.out, prefix=f"trace-{opts.run_id}")
    zk_capture = ZkWatch.start(state, opts.out / "zk" / f"{opts.run_id}.zk.jsonl")
    try:
        run = Recorder(spool, opts.run_id, topic.full, "run", "harness")
        run.emit("config", **_config_fields(opts, state))
        summary = _produce(opts, topic, client, spool, run, admin, state)
        consumer = drain_reader if opts.consumer == "reader" else drain_subscription
        make = Recorder.factory(spool, opts.run_id)
        restore = (summary["chaos"] or {}).pop("restore", None)
        if restore:  # read while the fault holds (reads may block), undo it, read again
            summary["consume_during_fault"] = consumer(client, admin, topic, make, retries=2)
            restore()
        summary["consume"] = consumer(client, admin, topic, make)
        if restore:
            restore.rest()
    finally:
        client.close()
        spool.close()
        zk_rows = zk_capture.stop()
    summary.update(run_id=opts.run_id, out=str(opts.out), events=spool.durable, zk_rows=zk_rows)
    summary["logs"] = runlogs.copy_since(marks, opts.out / "logs")
    (opts.out / "capture.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return summary


class ZkWatch:
    """The ZooKeeper capture running beside a harness run (a no-op without a known cluster)."""

    def __init__(self, capture: ZkCapture | None):
        self._capture = capture
        self._stop = threading.Event()
        self._rows = 0
        self._thread = threading.Thread(target=self._run, name="zk-capture", daemon=True)

    @classmethod
    def start(cls, state: ClusterState | None, out: Path) -> ZkWatch:
        zookeepers = [
            p.address("zookeeper") for p in (state.processes if state else []) if p.role
            in ("zookeeper", "standalone")
        ]  # fmt: skip
        watch = cls(ZkCapture(zookeepers[0], out) if zookeepers else None)
        if watch._capture is not None:
            watch._thread.start()
        return watch

    def _run(self) -> None:
        try:
            self._rows = self._capture.run(stop=self._stop)
        except Exception:  # noqa: BLE001 - the capture must never fail the run it observes
            log.warning("zk capture stopped early", exc_info=True)

    def stop(self) -> int:
        """Stop capturing; the rows written (each was fsync'd as it was written)."""
        if self._capture is None:
            return 0
        self._stop.set()
        self._thread.join(timeout=30)
        return self._rows


def _config_fields(opts: CaptureOptions, state: ClusterState | None) -> dict:
    e, qw, qa = opts.config
    return {
        "ensemble_size": e,
        "write_quorum": qw,
        "ack_quorum": qa,
        "brokers": state.brokers if state else 1,
        "bookies": state.bookies if state else 1,
        "deduplication": opts.deduplication,
        "scenario": opts.scenario,
        "messages": opts.messages,
        "in_flight": opts.in_flight,
        "consumer": opts.consumer,
        "chaos": f"{opts.chaos.label}@{opts.chaos.at_ack}" if opts.chaos else None,
        "rate": opts.rate or None,
        "netns": bool(state and state.network),
    }


class _Acks:
    """Counts callbacks; fires `trigger` when the ack count reaches the chaos mark."""

    def __init__(self, total: int, chaos_at: int | None):
        self.total, self.chaos_at = total, chaos_at
        self.acked = self.nacked = 0
        self.lock = threading.Lock()
        self.all_done = threading.Event()
        self.trigger = threading.Event()
        self.cancelled = False

    def count(self, ok: bool) -> None:
        with self.lock:
            if ok:
                self.acked += 1
                if self.acked == self.chaos_at:
                    self.trigger.set()
            else:
                self.nacked += 1
            if self.acked + self.nacked == self.total:
                self.all_done.set()


def _produce(opts, topic, client, spool, run, admin, state) -> dict:  # noqa: ANN001
    producer = client.create_producer(
        topic.full,
        producer_name=f"{opts.run_id}-producer",
        batching_enabled=False,
        max_pending_messages=opts.in_flight,
        block_if_queue_full=True,
        send_timeout_millis=30_000,
    )
    rec = Recorder(spool, opts.run_id, topic.full, "producer", producer.producer_name())
    acks = _Acks(opts.messages, opts.chaos.at_ack if opts.chaos else None)
    chaos_thread = _start_chaos(opts, admin, topic, state, run, acks)

    def on_result(seq: int, res: pulsar.Result, msg_id: pulsar.MessageId) -> None:
        if res == pulsar.Result.Ok:
            rec.emit("ack", seq=seq, **_message_id(msg_id))
        else:
            rec.emit("nack", seq=seq, error=str(res))
        acks.count(res == pulsar.Result.Ok)

    padding = b"." * opts.payload_bytes
    started = time.monotonic()
    for seq in range(opts.messages):
        if opts.rate:  # pace the sends so that the run spans the fault
            time.sleep(max(0.0, started + seq / opts.rate - time.monotonic()))
        rec.emit("send", seq=seq)
        producer.send_async(
            padding,
            lambda res, msg_id, seq=seq: on_result(seq, res, msg_id),
            properties={"seq": str(seq)},
            sequence_id=seq,
        )
    # No flush(): with every bookie of a write quorum gone it can block past the send timeout
    # (seen with kill-qw-bookies at 2-2-2); the callbacks are awaited with a deadline instead.
    finished = acks.all_done.wait(timeout=120 + opts.messages / 1000)
    elapsed = time.monotonic() - started
    chaos_result = _finish_chaos(chaos_thread, acks)
    producer.close()
    return {
        "messages": opts.messages,
        "acked": acks.acked,
        "nacked": acks.nacked,
        "all_callbacks": finished,
        "produce_s": round(elapsed, 3),
        "produce_rate": round(opts.messages / elapsed, 1),
        "chaos": chaos_result,
    }


def _message_id(msg_id: pulsar.MessageId) -> dict:
    return {
        "ledger_id": msg_id.ledger_id(),
        "entry_id": msg_id.entry_id(),
        "batch_index": msg_id.batch_index(),
        "partition": msg_id.partition(),
    }


def _start_chaos(opts, admin, topic, state, run, acks) -> threading.Thread | None:  # noqa: ANN001
    if not opts.chaos:
        return None
    spec, outcome = opts.chaos, {}

    def report(target: str, details: dict) -> None:
        fields = {"phase": "start", **details}
        run.emit("chaos", action=spec.label, target=target, ack_count=acks.acked, **fields)

    def act() -> None:
        acks.trigger.wait()
        if acks.cancelled:
            outcome["error"] = f"ack count never reached {spec.at_ack}"
            return
        try:
            outcome.update(
                chaos.run_action(spec, admin, topic, state, report, write_quorum=opts.config[1])
            )
        except Exception as exc:  # noqa: BLE001 - reported in the summary, the run goes on
            log.exception("chaos action %s failed", spec.action)
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=act, name="chaos", daemon=True)
    thread.outcome = outcome  # type: ignore[attr-defined]
    thread.start()
    return thread


def _finish_chaos(thread: threading.Thread | None, acks: _Acks) -> dict | None:
    if thread is None:
        return None
    if not acks.trigger.is_set():
        acks.cancelled = True
        acks.trigger.set()
    thread.join(timeout=180)
    return dict(thread.outcome)  # type: ignore[attr-defined]
