"""One live consumer of a subscription, in a process of its own, so that the harness can kill
it (SIGKILL) the way a crash kills a consumer: `python -m capture.consumer_worker`, its
WorkerConfig as JSON in the environment variable CONFIG_VAR (not on the command line, which
any local user can read; the URL might carry credentials).

It subscribes, records `subscribe` and prints `{"ready": ...}`; then it receives until stdin
says `end` (the subscription is drained: it records `end`) or `stop` (it leaves without `end`,
as a consumer closed mid-run does; so does an EOF). With `consume_rate` R it receives at most R
messages a second (a slow consumer: a backlog builds while the producer sends faster) until
stdin says `drain` (the producer is done): from then on it receives as fast as it can. A paced
consumer's receiver queue holds about a second's worth (`receiver_queue`), not the client's
1000, so that its backlog stays in the topic (read from the bookies once it is out of the
broker's cache), where a fault of the bookies can take it.

Each receive is recorded and handed to the OS (`Spool.flush`) *before* the message is
acknowledged, so that a kill never leaves a message acknowledged but unrecorded. With
`nack_every` K, a message whose seq is a multiple of K is negatively acknowledged when it
arrives with redelivery count 0 (its receive says `negative_ack: true`), so that the broker
redelivers it after `nack_delay_ms`. The last line
printed is the process's summary (JSON).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import pulsar

from capture.consume import receive_fields, subscribe_options
from capture.recorder import Recorder
from capture.spool import Spool, live_name
from pulsar_audit.secrets import PulsarAuth

POLL_MS = 200  # a receive's timeout: how soon a command on stdin is noticed
NACK_DELAY_MS = 1000  # the client's default (60 s) would outlast a short run
COMMANDS = ("end", "stop")
DRAIN = "drain"  # stop pacing: the harness drains the subscription
BURST_S = 1.0  # a paced consumer that had nothing to read may then read this long's worth at once
CLIENT_QUEUE = 1000  # the client's receiver queue: how many messages it fetches ahead
CONFIG_VAR = "PULSAR_AUDIT_CONSUMER_WORKER"


@dataclass(frozen=True)
class WorkerConfig:
    """What one consumer process needs; `incarnation` counts its restarts under one name."""

    service_url: str
    topic: str
    subscription: str
    subscription_type: str
    name: str
    run_id: str
    out: str
    incarnation: int = 0
    first_index: int = 0
    nack_every: int = 0
    nack_delay_ms: int = NACK_DELAY_MS
    roll_s: float | None = None  # roll its trace segment into place this often (Spool)
    live_log: bool = False  # its client log under a name a watch does not take until the end
    consume_rate: float = 0.0  # receives per second until told to drain (0: unpaced)

    @property
    def prefix(self) -> str:
        """Its trace files' prefix: one set of files per process (a killed one's stay whole)."""
        return f"trace-{self.run_id}-{self.name}.{self.incarnation}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class _Command:
    """The lines on stdin: `drain` (stop pacing), then `end` or `stop`; EOF counts as `stop`."""

    def __init__(self) -> None:
        self.given = threading.Event()
        self.draining = threading.Event()
        self.value = "stop"
        threading.Thread(target=self._read, name="command", daemon=True).start()

    def _read(self) -> None:
        for raw in sys.stdin:
            line = raw.strip()
            if line == DRAIN:
                self.draining.set()
                continue
            self.value = line if line in COMMANDS else "stop"
            break
        self.draining.set()
        self.given.set()


def next_receive_at(due: float, received_at: float, rate: float) -> float:
    """When a consumer paced at `rate` receives per second may receive next, after a receive
    at `received_at` that was allowed from `due`: 1/rate later, with at most BURST_S of
    credit left from a time it had nothing to read."""
    return max(due, received_at - BURST_S) + 1.0 / rate


def _say(payload: dict) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _subscribe(client: pulsar.Client, config: WorkerConfig) -> pulsar.Consumer:
    return client.subscribe(
        config.topic,
        config.subscription,
        consumer_name=config.name,
        initial_position=pulsar.InitialPosition.Earliest,
        negative_ack_redelivery_delay_ms=config.nack_delay_ms,
        receiver_queue_size=receiver_queue(config.consume_rate),
        **subscribe_options(config.subscription_type),
    )


def receiver_queue(consume_rate: float) -> int:
    """How many messages the client fetches ahead of the receives: the client's default,
    or a second's worth of a paced consumer's (at least 1: 0 would be the zero queue)."""
    if not consume_rate:
        return CLIENT_QUEUE
    return max(1, min(CLIENT_QUEUE, math.ceil(consume_rate)))


def run(config: WorkerConfig) -> dict:
    """Subscribe, consume until told, return the summary (received, nacked, ended, ...)."""
    out = Path(config.out)
    log_file = out / "logs" / "client" / f"{config.name}.{config.incarnation}.log"
    if config.live_log:  # a watch takes a file once: it gets its name whole, at the end
        log_file = live_name(log_file)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    spool = Spool(out, prefix=config.prefix, roll_s=config.roll_s)
    rec = Recorder(spool, config.run_id, config.topic, "consumer", config.name, config.first_index)
    client = pulsar.Client(
        config.service_url,
        **PulsarAuth.from_env().client_options(),
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Info, str(log_file)),
    )
    counts: Counter = Counter()
    started = time.monotonic()
    try:
        consumer = _subscribe(client, config)
        rec.emit(
            "subscribe",
            subscription=config.subscription,
            subscription_type=config.subscription_type,
            incarnation=config.incarnation,
        )
        spool.flush()
        _say({"ready": True, "name": config.name, "pid": os.getpid()})
        command = _Command()
        due = time.monotonic()
        while not command.given.is_set():
            wait = due - time.monotonic()
            if config.consume_rate and wait > 0 and not command.draining.is_set():
                command.draining.wait(min(wait, POLL_MS / 1000))
                continue
            if _consume_one(consumer, config, rec, spool, counts) and config.consume_rate:
                due = next_receive_at(due, time.monotonic(), config.consume_rate)
        if command.value == "end":
            rec.emit("end", subscription=config.subscription)
        with contextlib.suppress(pulsar.PulsarException):
            consumer.close()
    finally:
        client.close()
        spool.close()
    return {
        "name": config.name,
        "incarnation": config.incarnation,
        "pid": os.getpid(),
        "received": counts["received"],
        "nacked": counts["nacked"],
        "foreign": counts["foreign"],
        "errors": counts["errors"],
        "ended": command.value == "end",
        "events": spool.durable,
        "read_s": round(time.monotonic() - started, 3),
    }


def _consume_one(
    consumer: pulsar.Consumer, config: WorkerConfig, rec: Recorder, spool: Spool, counts: Counter
) -> bool:
    """Receive one message (within POLL_MS), record it, then acknowledge it; whether one came."""
    try:
        message = consumer.receive(timeout_millis=POLL_MS)
    except pulsar.Timeout:
        return False
    except pulsar.PulsarException:  # e.g. while its broker restarts: the client reconnects
        counts["errors"] += 1
        time.sleep(POLL_MS / 1000)
        return False
    fields = receive_fields(message, config.subscription, config.subscription_type)
    if fields is None:
        counts["foreign"] += 1
        consumer.acknowledge(message)
        return True
    nack = bool(config.nack_every) and fields["seq"] % config.nack_every == 0
    nack = nack and fields["redelivery_count"] == 0
    rec.emit("receive", **fields, negative_ack=nack or None)
    spool.flush()  # recorded before the broker hears of it
    counts["received"] += 1
    if nack:
        consumer.negative_acknowledge(message)
        counts["nacked"] += 1
    else:
        consumer.acknowledge(message)
    return True


def main() -> int:
    if CONFIG_VAR not in os.environ:
        sys.stderr.write(f"usage: {CONFIG_VAR}=CONFIG_JSON python -m capture.consumer_worker\n")
        return 2
    config = WorkerConfig(**json.loads(os.environ[CONFIG_VAR]))
    _say({"summary": run(config)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
