"""Read a topic back after a run: a Reader from the earliest message, or a subscription consumer.

Both emit one `receive` per message (seq from the `seq` property, MessageId, producer name,
redelivery count, subscription type, the message's key and ordering key when it has them) and
one `end` once they have provably reached the end of the topic: the Reader when
`has_message_available()` turns false, the subscription when its backlog is 0. Messages
without a `seq` property (not ours) are counted, not recorded. A Reader is an exclusive
(non-durable) subscription, so its events say `Exclusive`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import TypeVar

import pulsar

from capture.admin import Admin, TopicName
from capture.recorder import Recorder

log = logging.getLogger(__name__)

READ_TIMEOUT_MS = 10_000
RETRIES = 6  # reads that time out in a row (e.g. while a broker restarts) before giving up
# Attempts at opening the read-back's reader or consumer: right after a fault (a broker killed
# and restarted, a bundle moving) the topic's lookup can time out (the client's operation
# timeout, 30 s) while its ownership settles; the read-back tries again rather than lose the run.
OPEN_ATTEMPTS = 3

T = TypeVar("T")


def open_retrying(open_it: Callable[[], T], attempts: int = OPEN_ATTEMPTS) -> T:
    """`open_it()`, tried again after a pulsar.Timeout, at most `attempts` times in all (the
    last Timeout raised)."""
    for attempt in range(1, attempts):
        try:
            return open_it()
        except pulsar.Timeout:
            log.warning("opening the read-back timed out (attempt %d of %d)", attempt, attempts)
    return open_it()


MakeRecorder = Callable[[str, str, str], Recorder]
# Trace format v1.1's subscription types → the client's consumer types.
CONSUMER_TYPES = {
    "Exclusive": pulsar.ConsumerType.Exclusive,
    "Failover": pulsar.ConsumerType.Failover,
    "Shared": pulsar.ConsumerType.Shared,
    "Key_Shared": pulsar.ConsumerType.KeyShared,
}


def subscribe_options(subscription_type: str) -> dict:
    """The `Client.subscribe` arguments of a subscription type (Key_Shared: the default
    policy, auto-split hash ranges, in-order delivery)."""
    options: dict = {"consumer_type": CONSUMER_TYPES[subscription_type]}
    if subscription_type == "Key_Shared":
        options["key_shared_policy"] = pulsar.ConsumerKeySharedPolicy()
    return options


def receive_fields(
    message: pulsar.Message, subscription: str, subscription_type: str = "Exclusive"
) -> dict | None:
    """The `receive` event of one of our messages (None for a message without `seq`)."""
    seq = message.properties().get("seq")
    if seq is None or not seq.isdigit():
        return None
    msg_id = message.message_id()
    return {
        "seq": int(seq),
        "partition": msg_id.partition(),
        "ledger_id": msg_id.ledger_id(),
        "entry_id": msg_id.entry_id(),
        "batch_index": msg_id.batch_index(),
        "subscription": subscription,
        "subscription_type": subscription_type,
        "producer": message.producer_name(),
        "redelivery_count": message.redelivery_count(),
        # the client answers "" for a message without one: absent in the trace
        "key": message.partition_key() or None,
        "ordering_key": message.ordering_key() or None,
    }


def drain_reader(
    client: pulsar.Client,
    admin: Admin,
    topic: TopicName,
    make: MakeRecorder,
    retries: int = RETRIES,
) -> dict:
    """Read from the earliest message until none is left; `end` only if the end was reached.

    retries: reads that fail in a row before giving up (few while a fault blocks reads)."""
    name = f"reader-{secrets.token_hex(4)}"
    reader = open_retrying(
        lambda: client.create_reader(topic.full, pulsar.MessageId.earliest, reader_name=name)
    )
    rec = make(topic.full, "consumer", name)
    rec.emit("subscribe", subscription=name, subscription_type="Exclusive")
    received = foreign = failures = 0
    started = time.monotonic()
    while failures < retries:
        try:
            if not reader.has_message_available():
                break
            message = reader.read_next(timeout_millis=READ_TIMEOUT_MS)
        except (pulsar.Timeout, pulsar.PulsarException):
            failures += 1
            continue
        failures = 0
        fields = receive_fields(message, name)
        if fields is None:
            foreign += 1
            continue
        rec.emit("receive", **fields)
        received += 1
    reached_end = failures < retries
    if reached_end:
        rec.emit("end", subscription=name)
    with contextlib.suppress(pulsar.PulsarException):
        reader.close()
    return _summary("reader", name, received, foreign, reached_end, started)


def drain_subscription(
    client: pulsar.Client,
    admin: Admin,
    topic: TopicName,
    make: MakeRecorder,
    retries: int = RETRIES,
    subscription_type: str = "Exclusive",
    name: str | None = None,
) -> dict:
    """Consume with one consumer of a new subscription of `subscription_type` from the
    earliest position (or of the existing subscription `name`), acknowledging each message,
    until a receive times out and the subscription's backlog is 0."""
    name = name or f"audit-{secrets.token_hex(4)}"
    consumer = open_retrying(
        lambda: client.subscribe(
            topic.full,
            name,
            initial_position=pulsar.InitialPosition.Earliest,
            consumer_name=name,
            **subscribe_options(subscription_type),
        )
    )
    rec = make(topic.full, "consumer", name)
    rec.emit("subscribe", subscription=name, subscription_type=subscription_type)
    received = foreign = idle = 0
    started = time.monotonic()
    reached_end = False
    while idle < retries:
        try:
            message = consumer.receive(timeout_millis=2000)
        except pulsar.Timeout:
            idle += 1
            if backlog(admin, topic, name) == 0:
                reached_end = True
                break
            continue
        idle = 0
        fields = receive_fields(message, name, subscription_type)
        consumer.acknowledge(message)
        if fields is None:
            foreign += 1
            continue
        rec.emit("receive", **fields)
        received += 1
    if reached_end:
        rec.emit("end", subscription=name)
    consumer.close()
    return _summary("subscription", name, received, foreign, reached_end, started)


def backlog(admin: Admin, topic: TopicName, subscription: str) -> int | None:
    """The subscription's backlog (messages not yet acknowledged), None when it is unknown."""
    stats = admin.topic_stats(topic).get("subscriptions", {}).get(subscription, {})
    return stats.get("msgBacklog")


def _summary(kind: str, name: str, received: int, foreign: int, end: bool, t0: float) -> dict:
    elapsed = time.monotonic() - t0
    return {
        "consumer": kind,
        "name": name,
        "received": received,
        "foreign": foreign,
        "reached_end": end,
        "read_s": round(elapsed, 3),
        "read_rate": round(received / elapsed, 1) if elapsed else None,
    }
