"""The producer side of a harness run: N messages with at most `in_flight` pending, each send,
ack and nack recorded with its MessageId, its key and ordering key; and what happens when the
ack count reaches a mark (the chaos action, the consumers' churn).

`seq` travels as the message's sequence_id and as its `seq` property. With `keys` K a message
has the key `key-<seq mod K>`, with `ordering_keys` M the ordering key `okey-<seq mod M>`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pulsar

from capture import chaos
from capture.recorder import Recorder

log = logging.getLogger(__name__)
Step = tuple[int, Callable[[int], None]]  # (mark, what to do then, given the ack count)


def message_keys(seq: int, keys: int, ordering_keys: int) -> dict:
    """The key and ordering key of message `seq` (None: the message has none)."""
    return {
        "key": f"key-{seq % keys}" if keys else None,
        "ordering_key": f"okey-{seq % ordering_keys}" if ordering_keys else None,
    }


class Acks:
    """Counts callbacks; sets each mark's event when the ack count reaches it."""

    def __init__(self, total: int, marks: list[int]):
        self.total = total
        self.acked = self.nacked = 0
        self.lock = threading.Lock()
        self.all_done = threading.Event()
        self.reached = {mark: threading.Event() for mark in marks}

    def count(self, ok: bool) -> None:
        with self.lock:
            if ok:
                self.acked += 1
                if self.acked in self.reached:
                    self.reached[self.acked].set()
            else:
                self.nacked += 1
            if self.acked + self.nacked == self.total:
                self.all_done.set()

    def release(self) -> None:
        """Production is over: let whoever waits for a mark not reached go on."""
        for event in self.reached.values():
            event.set()


def produce(opts, topic, client, spool, run, admin, state, churn: list[Step]) -> dict:  # noqa: ANN001
    """Send opts.messages, run the chaos actions and the churn steps at their marks; the
    production summary (with "chaos": one action's outcome, a list of them for several; and,
    with churn, "churn")."""
    producer = client.create_producer(
        topic.full,
        producer_name=f"{opts.run_id}-producer",
        batching_enabled=opts.batching,  # the client's defaults: 10 ms, 1000 messages
        max_pending_messages=opts.in_flight,
        block_if_queue_full=True,
        send_timeout_millis=30_000,
    )
    rec = Recorder(spool, opts.run_id, topic.full, "producer", producer.producer_name())
    marks = [at for at, _ in churn] + [spec.at_ack for spec in opts.chaos_actions]
    acks = Acks(opts.messages, marks)
    chaos_thread = _start_chaos(opts, admin, topic, state, run, acks)
    churn_thread = _start_churn(churn, acks)

    def on_result(seq: int, res: pulsar.Result, msg_id: pulsar.MessageId) -> None:
        keys = message_keys(seq, opts.keys, opts.ordering_keys)
        if res == pulsar.Result.Ok:
            rec.emit("ack", seq=seq, **message_id(msg_id), **keys)
        else:
            rec.emit("nack", seq=seq, error=str(res), **keys)
        acks.count(res == pulsar.Result.Ok)

    padding = b"." * opts.payload_bytes
    started = time.monotonic()
    for seq in range(opts.messages):
        if opts.rate:  # pace the sends so that the run spans the fault
            time.sleep(max(0.0, started + seq / opts.rate - time.monotonic()))
        keys = message_keys(seq, opts.keys, opts.ordering_keys)
        rec.emit("send", seq=seq, **keys)
        producer.send_async(
            padding,
            lambda res, msg_id, seq=seq: on_result(seq, res, msg_id),
            properties={"seq": str(seq)},
            sequence_id=seq,
            partition_key=keys["key"],
            ordering_key=keys["ordering_key"],
        )
    # No flush(): with every bookie of a write quorum gone it can block past the send timeout
    # (seen with kill-qw-bookies at 2-2-2); the callbacks are awaited with a deadline instead.
    finished = acks.all_done.wait(timeout=120 + opts.messages / 1000)
    elapsed = time.monotonic() - started
    acks.release()
    chaos_result = _finish(chaos_thread)
    churn_result = _finish(churn_thread)
    producer.close()
    summary = {
        "messages": opts.messages,
        "acked": acks.acked,
        "nacked": acks.nacked,
        "all_callbacks": finished,
        "produce_s": round(elapsed, 3),
        "produce_rate": round(opts.messages / elapsed, 1),
        "chaos": chaos_result,
    }
    if churn_result is not None:
        summary["churn"] = churn_result
    return summary


def message_id(msg_id: pulsar.MessageId) -> dict:
    return {
        "ledger_id": msg_id.ledger_id(),
        "entry_id": msg_id.entry_id(),
        "batch_index": msg_id.batch_index(),
        "partition": msg_id.partition(),
    }


def _start_chaos(opts, admin, topic, state, run, acks: Acks) -> threading.Thread | None:  # noqa: ANN001
    """The chaos actions one after the other, each when its mark is reached (and the one before
    it is done), each reported as its own `chaos` run events."""
    specs = opts.chaos_actions
    if not specs:
        return None
    outcomes: list[dict] = [{} for _ in specs]

    def act_one(spec: chaos.ChaosSpec, outcome: dict) -> None:
        def report(target: str, details: dict) -> None:
            fields = {"phase": "start", **details}
            run.emit("chaos", action=spec.label, target=target, ack_count=acks.acked, **fields)

        acks.reached[spec.at_ack].wait()
        if acks.acked < spec.at_ack:
            outcome["error"] = f"ack count never reached {spec.at_ack}"
            return
        try:
            outcome.update(
                chaos.run_action(spec, admin, topic, state, report, write_quorum=opts.config[1])
            )
        except Exception as exc:  # noqa: BLE001 - reported in the summary, the run goes on
            log.exception("chaos action %s failed", spec.action)
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    def act() -> None:
        for spec, outcome in zip(specs, outcomes, strict=True):
            act_one(spec, outcome)

    thread = _thread(act, "chaos", {})
    # one action: its outcome as before; several: their outcomes in order
    thread.outcome = outcomes[0] if len(specs) == 1 else outcomes  # type: ignore[attr-defined]
    return thread


def _start_churn(steps: list[Step], acks: Acks) -> threading.Thread | None:
    """Run the steps in order, each when its mark is reached (or at once once production is
    over: a consumer that left must come back, to read to the end)."""
    if not steps:
        return None
    outcome: dict = {"steps": []}

    def act() -> None:
        for at, step in steps:
            acks.reached[at].wait()
            entry = {"step": step.__name__, "at_ack": at, "ack_count": acks.acked}
            try:
                step(entry["ack_count"])
            except Exception as exc:  # noqa: BLE001 - reported in the summary, the run goes on
                log.exception("churn step %s failed", step.__name__)
                entry["error"] = f"{type(exc).__name__}: {exc}"
            outcome["steps"].append(entry)

    return _thread(act, "churn", outcome)


def _thread(target: Callable[[], None], name: str, outcome: dict) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.outcome = outcome  # type: ignore[attr-defined]
    thread.start()
    return thread


def _finish(thread: threading.Thread | None) -> dict | list | None:
    if thread is None:
        return None
    thread.join(timeout=180)
    outcome = thread.outcome  # type: ignore[attr-defined]
    return [dict(item) for item in outcome] if isinstance(outcome, list) else dict(outcome)
