"""Live consumers: N consumers of one subscription, each a process of its own
(consumer_worker.py), subscribed before the producer starts and consuming while it sends, as
applications do; the churn of a run (a consumer crashes or closes and comes back under its
name, another one joins); and the drain that ends the run once the subscription's backlog is 0.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from capture.admin import Admin, TopicName
from capture.consume import backlog
from capture.consumer_process import ConsumerProcess, killed_summary, next_event_index
from capture.consumer_worker import DRAIN, WorkerConfig
from capture.scenarios import CHURN_MODES
from pulsar_audit.errors import UsageError
from pulsar_audit.kinds import SUBSCRIPTION_TYPES

# When each churn step comes, as the fraction of the messages acknowledged to the producer.
LEAVE_AT, JOIN_AT, RETURN_AT = 0.3, 0.5, 0.7
ROLLING_FROM, ROLLING_TO = 0.2, 0.8  # a rolling restart's first and last consumer restart
DRAIN_POLL_S = 0.5
DRAIN_STALL_S = 30.0  # the drain gives up when the backlog has not fallen for this long
Report = Callable[[str, str, dict], None]  # (action, target, details) → a `chaos` run event


@dataclass(frozen=True)
class LiveOptions:
    consumers: int
    subscription_type: str = "Exclusive"
    nack_every: int = 0
    churn: str | None = None  # one of CHURN_MODES
    consume_rate: float = 0.0  # each consumer's receives per second until the drain (0: unpaced)

    def check(self) -> None:
        """Refuse what the subscription type cannot do (two consumers of an Exclusive one)."""
        if self.subscription_type not in SUBSCRIPTION_TYPES:
            raise UsageError(
                f"subscription type {self.subscription_type!r}: expected one of "
                f"{', '.join(SUBSCRIPTION_TYPES)}"
            )
        if self.consumers < 1 or self.nack_every < 0 or self.churn not in (None, *CHURN_MODES):
            raise UsageError(
                "--consumers N needs N >= 1, --nack-every K K >= 0, --consumer-churn one of "
                f"{', '.join(CHURN_MODES)}"
            )
        if not self.consume_rate >= 0:  # NaN too
            raise UsageError(f"--consume-rate {self.consume_rate}: expected messages/s > 0")
        if self.subscription_type == "Exclusive" and self.consumers > 1:
            raise UsageError(
                f"--consumers {self.consumers}: an Exclusive subscription takes one consumer "
                "(use Failover, Shared or Key_Shared for several)"
            )


class LiveConsumers:
    """The consumers of one new subscription `audit-<hex>`, named `<subscription>-c<i>`."""

    def __init__(
        self, opts: LiveOptions, service_url: str, admin: Admin, topic: TopicName,
        run_id: str, out: Path, nack_delay_ms: int | None = None, roll_s: float | None = None,
        live_logs: bool = False,
    ):  # fmt: skip
        self.opts, self.admin, self.topic = opts, admin, topic
        self.subscription = f"audit-{secrets.token_hex(4)}"
        self._base = {"service_url": service_url, "topic": topic.full, "run_id": run_id,
                      "subscription": self.subscription, "out": str(out),
                      "subscription_type": opts.subscription_type,
                      "nack_every": opts.nack_every, "roll_s": roll_s, "live_log": live_logs,
                      "consume_rate": opts.consume_rate}  # fmt: skip
        if nack_delay_ms is not None:
            self._base["nack_delay_ms"] = nack_delay_ms
        self.out, self.run_id = out, run_id
        self._running: dict[str, ConsumerProcess] = {}
        self._incarnations: Counter = Counter()
        self._ended: list[dict] = []
        self._lock = threading.Lock()
        self._started = time.monotonic()

    def start(self) -> None:
        """Start the consumers and wait until each has subscribed."""
        names = [self.name_of(i) for i in range(1, self.opts.consumers + 1)]
        for proc in [self._spawn(name) for name in names]:
            proc.wait_ready()

    def name_of(self, number: int) -> str:
        """The name of consumer `number` (1-based) of the subscription."""
        return f"{self.subscription}-c{number}"

    def _spawn(self, name: str) -> ConsumerProcess:
        with self._lock:
            incarnation = self._incarnations[name]
            self._incarnations[name] += 1
            first = next_event_index(self.out, self.run_id, name) if incarnation else 0
            config = WorkerConfig(
                **self._base, name=name, incarnation=incarnation, first_index=first
            )
            proc = self._running[name] = ConsumerProcess(config, self.out)
        return proc

    def leave(self, victim: str, how: str) -> None:
        """`victim` goes: killed (SIGKILL, as a crash) or closed (no `end`)."""
        with self._lock:
            proc = self._running.pop(victim)
        if how == "kill":
            proc.kill()
            self._ended.append(killed_summary(self.out, proc))
        else:
            proc.tell("stop")
            self._ended.append(proc.summary())

    def come_back(self, name: str) -> dict:
        """Start `name` again: a new process, its events numbered on from the last one's."""
        proc = self._spawn(name)
        proc.wait_ready()
        return {"pid": proc.pid, "incarnation": proc.config.incarnation}

    def join(self, name: str) -> dict:
        """A consumer that was not there at the start subscribes."""
        proc = self._spawn(name)
        proc.wait_ready()
        return {"pid": proc.pid}

    def next_name(self) -> str:
        """The name a consumer joining now takes."""
        return self.name_of(len(self._incarnations) + 1)

    def victim(self) -> tuple[str, dict]:
        """The consumer to take away: Failover's active one, else the first one running;
        with its pid."""
        name = self._victim()
        return name, {"pid": self._running[name].pid}

    def _victim(self) -> str:
        running = list(self._running)
        if self.opts.subscription_type == "Failover":
            with contextlib.suppress(UsageError):
                stats = self.admin.topic_stats(self.topic)["subscriptions"][self.subscription]
                if stats.get("activeConsumerName") in running:
                    return stats["activeConsumerName"]
        return running[0]

    def drain(self) -> dict:
        """Tell every consumer to stop pacing, wait until the subscription's backlog is 0
        (twice in a row), then tell them to record `end`; when it stops falling for
        DRAIN_STALL_S, stop them without. Returns the consumption summary, one entry per
        consumer process."""
        with self._lock:
            running = list(self._running.values())
        for proc in running if self.opts.consume_rate else ():
            proc.tell(DRAIN, last=False)
        drained, zeros, lowest = False, 0, None
        progress_at = time.monotonic()
        while time.monotonic() - progress_at < DRAIN_STALL_S:
            try:
                left = backlog(self.admin, self.topic, self.subscription)
            except UsageError:  # the admin REST is unavailable while a broker restarts
                left = None
            if left is not None and (lowest is None or left < lowest):
                lowest, progress_at = left, time.monotonic()
            zeros = zeros + 1 if left == 0 else 0
            if zeros >= 2:
                drained = True
                break
            time.sleep(DRAIN_POLL_S)
        with self._lock:
            running, self._running = list(self._running.values()), {}
        for proc in running:
            proc.tell("end" if drained else "stop")
        processes = self._ended + [proc.summary() for proc in running]
        elapsed = time.monotonic() - self._started
        received = sum(p.get("received", 0) for p in processes)
        return {
            "consumer": "subscription",
            "name": self.subscription,
            "subscription_type": self.opts.subscription_type,
            "received": received,
            "nacked": sum(p.get("nacked", 0) for p in processes),
            "foreign": sum(p.get("foreign", 0) for p in processes),
            "reached_end": drained,
            "backlog_left": lowest,
            "read_s": round(elapsed, 3),
            "read_rate": round(received / elapsed, 1) if elapsed else None,
            "consumers": processes,
        }

    def close(self) -> None:
        """Kill whatever still runs (a run that failed before its drain)."""
        with self._lock:
            running, self._running = list(self._running.values()), {}
        for proc in running:
            proc.kill()


def churn_steps(live: LiveConsumers, how: str, messages: int, report: Report) -> list:
    """The churn of a run as (ack count, step): a consumer leaves at LEAVE_AT of the acks
    (`how`: kill or close), a new one joins at JOIN_AT (not on an Exclusive subscription, which
    takes one consumer), the one that left comes back at RETURN_AT. Each step is reported as
    a `chaos` run event: `<how>-consumer` phase start and end, `join-consumer`."""
    left: dict[str, str] = {}
    action = f"{how}-consumer"

    def leave(ack_count: int) -> None:  # reported first, as every fault is
        name, details = live.victim()
        left["name"] = name
        report(action, name, {"ack_count": ack_count, "phase": "start", **details})
        live.leave(name, how)

    def join(ack_count: int) -> None:
        name = live.next_name()
        report("join-consumer", name, {"ack_count": ack_count, "phase": "start"})
        live.join(name)

    def come_back(ack_count: int) -> None:
        details = live.come_back(left["name"])
        fields = {"ack_count": ack_count, "phase": "end", "restarted": True, **details}
        report(action, left["name"], fields)

    if how == "rolling":
        return rolling_steps(live, messages, report)
    steps = [(LEAVE_AT, leave), (JOIN_AT, join), (RETURN_AT, come_back)]
    if live.opts.subscription_type == "Exclusive":
        steps.pop(1)
    return [(max(1, int(messages * at)), step) for at, step in steps]


def rolling_marks(consumers: int, messages: int) -> list[int]:
    """The ack counts at which consumer 1, 2, … N restarts: evenly spread over
    ROLLING_FROM..ROLLING_TO of the messages."""
    span = (ROLLING_TO - ROLLING_FROM) / max(1, consumers - 1)
    return [max(1, int(messages * (ROLLING_FROM + i * span))) for i in range(consumers)]


def rolling_steps(live: LiveConsumers, messages: int, report: Report) -> list:
    """Each consumer of the start, in turn, closes and is started again under its name: a
    `restart-consumer` chaos event with phase start (closed) and end (back)."""

    def restart_of(name: str) -> Callable[[int], None]:
        def restart(ack_count: int) -> None:  # its name is the step's in capture.json
            report("restart-consumer", name, {"ack_count": ack_count, "phase": "start"})
            live.leave(name, "close")
            details = live.come_back(name)
            fields = {"ack_count": ack_count, "phase": "end", "restarted": True, **details}
            report("restart-consumer", name, fields)

        return restart

    names = [live.name_of(i) for i in range(1, live.opts.consumers + 1)]
    marks = rolling_marks(len(names), messages)
    return [(mark, restart_of(name)) for mark, name in zip(marks, names, strict=True)]
