"""Capture one run as a trace (format v1.1): produce N messages, consume them, maybe inject chaos.

The producer (produce.py) keeps at most `in_flight` messages pending (block_if_queue_full) and
records each send, ack and nack with its MessageId, time and keys. The messages are consumed
either after production (a Reader from the earliest message to the end, or one subscription
consumer that drains it: consume.py; `pre-created`: a subscription the admin API created at the
latest position before the first send, as in apache/pulsar#18236) or, with `consumers` N, by N
consumers of one subscription of `subscription_type`, each a process of its own, subscribed
before the first send and consuming while the producer sends (live.py), with their churn when
asked, paced when asked (a slow consumer's backlog). Every
event goes through the crash-safe spool; the broker/bookie log lines written during the run
are copied to <out>/logs.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pulsar

from capture import chaos, runlogs
from capture.admin import Admin, TopicName
from capture.consume import drain_reader, drain_subscription
from capture.live import LiveConsumers, LiveOptions, churn_steps
from capture.processes import ClusterState
from capture.produce import produce
from capture.recorder import Recorder
from capture.scenarios import CONSUMERS, PRE_CREATED
from capture.spool import Spool, live_name
from capture.zk_capture import ZkCapture
from pulsar_audit.errors import UsageError
from pulsar_audit.kinds import SUBSCRIPTION_TYPES
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
    chaos: chaos.ChaosSpec | tuple[chaos.ChaosSpec, ...] | None = None  # several: in order
    consumer: str = "reader"
    deduplication: bool = False
    batching: bool = False  # the producer batches sends (entries hold several messages)
    scenario: str = "control"
    payload_bytes: int = 100
    rate: float = 0.0  # sends per second (0: as fast as in_flight allows)
    run_id: str = field(default_factory=lambda: new_run_id("capture"))
    subscription_type: str = "Exclusive"  # of the consumers (a Reader is Exclusive)
    consumers: int = 0  # live consumers of one subscription (0: read back after production)
    keys: int = 0  # messages keyed from this many keys (0: no key)
    ordering_keys: int = 0  # ... and ordering keys (0: none)
    nack_every: int = 0  # live consumers negatively acknowledge every K-th message once
    consumer_churn: str | None = None  # kill | close: a live consumer leaves and comes back
    consume_rate: float = 0.0  # live consumers' receives per second until the drain (0: unpaced)
    roll_s: float | None = None  # trace files rolled into --out this often (None: at the end)
    # with roll_s, the cluster's and client's logs and the ZooKeeper capture too (for a watch
    # beside the run: `--watch`); else each log is one file per process, copied at the end
    roll_logs: bool = False

    def check(self) -> None:
        """Refuse combinations the harness cannot run."""
        if self.subscription_type not in SUBSCRIPTION_TYPES:
            raise UsageError(
                f"--subscription-type {self.subscription_type!r}: expected one of "
                f"{', '.join(SUBSCRIPTION_TYPES)}"
            )
        if self.consumer not in CONSUMERS:
            raise UsageError(
                f"--consumer {self.consumer!r}: expected one of {', '.join(CONSUMERS)}"
            )
        if self.consumer == PRE_CREATED and self.consumers:
            raise UsageError("--consumer pre-created reads after production: not with --consumers")
        if self.keys < 0 or self.ordering_keys < 0:
            raise UsageError("--keys and --ordering-keys take a count >= 0")
        if (
            not self.consumers
            and self.consumer == "reader"
            and self.subscription_type != "Exclusive"
        ):
            raise UsageError(
                f"a Reader is an Exclusive subscription: --subscription-type "
                f"{self.subscription_type} needs --consumer subscription or --consumers N"
            )
        live_only = {"--nack-every": self.nack_every, "--consumer-churn": self.consumer_churn,
                     "--consume-rate": self.consume_rate}  # fmt: skip
        wanted = [name for name, value in live_only.items() if value]
        if wanted and not self.consumers:
            verb = "needs" if len(wanted) == 1 else "need"
            raise UsageError(f"{' and '.join(wanted)} {verb} live consumers (--consumers N)")
        if self.batching and self.subscription_type == "Key_Shared":
            raise UsageError(
                "--batching with Key_Shared: a batch holds messages of several keys and goes "
                "to one consumer; run Key_Shared without --batching"
            )
        if self.consumers:
            self.live_options().check()

    @property
    def chaos_actions(self) -> tuple[chaos.ChaosSpec, ...]:
        """The run's chaos actions in the order they fire (none, one, or several)."""
        if self.chaos is None:
            return ()
        return (self.chaos,) if isinstance(self.chaos, chaos.ChaosSpec) else tuple(self.chaos)

    def live_options(self) -> LiveOptions:
        return LiveOptions(
            self.consumers, self.subscription_type, self.nack_every, self.consumer_churn,
            self.consume_rate,
        )  # fmt: skip


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
    opts.check()
    for spec in opts.chaos_actions:
        chaos.check_possible(spec, state, opts.config)
    topic = TopicName.parse(opts.topic)
    admin = Admin(opts.admin_url)
    admin.set_infinite_retention(topic)  # else acknowledged ledgers may go before the read-back
    admin.set_persistence(topic, *opts.config)
    admin.set_deduplication(topic, opts.deduplication)
    precreated = None
    if opts.consumer == PRE_CREATED:  # before the topic has a message: its cursor is at L:-1
        precreated = f"audit-{secrets.token_hex(4)}"
        admin.create_subscription(topic, precreated)
    (opts.out / "logs" / "client").mkdir(parents=True, exist_ok=True)
    # the cluster's logs from here on, rolled into --out as the run goes when it rolls
    logs_roll_s = opts.roll_s if opts.roll_logs else None
    logs = runlogs.LogRoller(runlogs.mark(state), opts.out / "logs", logs_roll_s)
    try:
        return _capture_rolling(opts, state, topic, admin, precreated, logs)
    finally:
        logs.stop()  # a run that failed early: no thread copies on into --out


def _capture_rolling(
    opts: CaptureOptions,
    state: ClusterState | None,
    topic: TopicName,
    admin: Admin,
    precreated: str | None,
    logs: runlogs.LogRoller,
) -> dict:
    """The run itself, its cluster's logs rolled by `logs` (closed at its end)."""
    client_log = opts.out / "logs" / "client" / "client.log"
    if logs.roll_s:  # the client's log too, from a name no reader takes
        client_log = live_name(client_log)
        logs.add("client", "client", client_log)
    client = pulsar.Client(
        opts.service_url,
        **PulsarAuth.from_env().client_options(),
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Info, str(client_log)),
    )
    spool = Spool(opts.out, prefix=f"trace-{opts.run_id}", roll_s=opts.roll_s)
    zk_capture = ZkWatch.start(
        state, opts.out / "zk" / f"{opts.run_id}.zk.jsonl", roll_s=logs.roll_s
    )
    live = None
    if opts.consumers:
        live = LiveConsumers(
            opts.live_options(),
            opts.service_url,
            admin,
            topic,
            opts.run_id,
            opts.out,
            roll_s=opts.roll_s,
            live_logs=logs.roll_s is not None,
        )
    try:
        run = Recorder(spool, opts.run_id, topic.full, "run", "harness")
        run.emit("config", **_config_fields(opts, state))
        steps = []
        if live:
            live.start()  # every consumer subscribed before the first send
            steps = _churn(opts, live, run)
        summary = produce(opts, topic, client, spool, run, admin, state, steps)
        restore = _restore(summary["chaos"])
        if live:  # the consumers read during the fault already: undo it, then drain
            if restore:
                restore()
            summary["consume"] = live.drain()
        else:
            consumer = _read_back(opts, precreated)
            make = Recorder.factory(spool, opts.run_id)
            if restore:  # read while the fault holds (reads may block), undo it, read again
                summary["consume_during_fault"] = consumer(client, admin, topic, make, retries=2)
                restore()
            summary["consume"] = consumer(client, admin, topic, make)
        if restore:
            restore.rest()
    finally:
        if live:
            live.close()
        client.close()
        spool.close()
        zk_rows = zk_capture.stop()
        try:
            copied = logs.close()
        finally:
            runlogs.seal_live(opts.out / "logs")  # the consumer processes' logs, whole now
    events = spool.durable + sum(
        p.get("events", 0) for p in summary["consume"].get("consumers", [])
    )
    summary.update(run_id=opts.run_id, out=str(opts.out), events=events, zk_rows=zk_rows)
    summary["logs"] = copied
    (opts.out / "capture.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return summary


def _restore(outcome: dict | list | None) -> chaos.Restore | None:
    """The actions' restore steps (READ_WHILE_DOWN faults), taken out of the summary, as one:
    the last action's undone first; `.rest()` likewise finishes each."""
    outcomes = outcome if isinstance(outcome, list) else [outcome or {}]
    steps = [step for item in outcomes if (step := item.pop("restore", None))]
    if len(steps) <= 1:
        return steps[0] if steps else None

    def restore() -> None:
        for step in reversed(steps):
            step()

    def rest() -> None:
        for step in reversed(steps):
            step.rest()

    restore.rest = rest  # type: ignore[attr-defined]
    return restore


def _read_back(opts: CaptureOptions, precreated: str | None = None):  # noqa: ANN202
    """The read after production: a Reader, or one consumer of a subscription of the type
    (a new one, or the one created before the first send)."""
    if opts.consumer == "reader":
        return drain_reader

    def drain(client, admin, topic, make, **kwargs):  # noqa: ANN001, ANN003, ANN202
        kind = opts.subscription_type
        return drain_subscription(
            client, admin, topic, make, subscription_type=kind, name=precreated, **kwargs
        )

    return drain


def _churn(opts: CaptureOptions, live: LiveConsumers, run: Recorder) -> list:
    """The consumers' churn steps, each recorded as a `chaos` run event."""
    if not opts.consumer_churn:
        return []

    def report(action: str, target: str, details: dict) -> None:
        run.emit("chaos", action=action, target=target, **details)

    return churn_steps(live, opts.consumer_churn, opts.messages, report)


class ZkWatch:
    """The ZooKeeper capture running beside a harness run (a no-op without a known cluster)."""

    def __init__(self, capture: ZkCapture | None):
        self._capture = capture
        self._stop = threading.Event()
        self._rows = 0
        self._thread = threading.Thread(target=self._run, name="zk-capture", daemon=True)

    @classmethod
    def start(cls, state: ClusterState | None, out: Path, roll_s: float | None = None) -> ZkWatch:
        zookeepers = [
            p.address("zookeeper") for p in (state.processes if state else []) if p.role
            in ("zookeeper", "standalone")
        ]  # fmt: skip
        watch = cls(ZkCapture(zookeepers[0], out, roll_s=roll_s) if zookeepers else None)
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
        "batching": opts.batching,
        "scenario": opts.scenario,
        "messages": opts.messages,
        "in_flight": opts.in_flight,
        "consumer": "subscription" if opts.consumers else opts.consumer,
        "chaos": chaos.describe(opts.chaos_actions),
        "subscription_type": opts.subscription_type,
        "consumers": opts.consumers or None,
        "keys": opts.keys or None,
        "ordering_keys": opts.ordering_keys or None,
        "nack_every": opts.nack_every or None,
        "consumer_churn": opts.consumer_churn,
        "consume_rate": opts.consume_rate or None,
        "rate": opts.rate or None,
        "netns": bool(state and state.network),
    }
