"""What a simulated run is: the cluster, the producer, the consumers and the fault.

Times are integer microseconds. Every default is a Pulsar 4.0 / BookKeeper 4.17 default where
one exists (send timeout 30 s, metadata session timeout 30 s, 50,000 entries per ledger, the
client's reconnect backoff 100 ms · 2^k with up to −10 % jitter).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pulsar_audit.errors import UsageError
from simulate.key_shared import KeyShared, check, flat_options

DEFAULT_BOOKIES = 3
SCENARIOS = (
    "control",
    "unload",
    "transfer",
    "kill-broker",
    "isolate-broker",
    "kill-bookie",
    "isolate-bookie",
    "kill-bookies",
    "kill-qw-bookies",
    "partition-broker-from-bookies",
    "wipe-bookie-disk",
    "wipe-qw-bookies-disk",
)
# The harness's disk loss (capture/chaos.py): the bookies are killed, their journal and ledger
# directories deleted, and they restart `bookie_restart_us` later, registered but empty.
DISK_WIPES = ("wipe-bookie-disk", "wipe-qw-bookies-disk")
# Scenarios where the owner of the topic's bundle changes and producers reconnect.
OWNER_CHANGES = ("unload", "transfer", "kill-broker", "isolate-broker")
BOOKIE_FAULTS = ("kill-bookie", "isolate-bookie", "kill-bookies", "kill-qw-bookies", *DISK_WIPES)
# The owner broker loses its bookies (both ways dropped) and keeps its ZooKeeper session.
BOOKIE_PARTITION = "partition-broker-from-bookies"
SESSION_EXPIRED_POLICIES = ("shutdown", "reconnect")  # broker.conf zookeeperSessionExpiredPolicy
T0_US = 1_741_082_400_000_000  # 2025-03-04T10:00:00Z: day 0 of simulated time
DAY_US = 86_400_000_000
# A run starts at 10:00 UTC of one of these many days from T0_US (about a century), picked from
# its seed and run id: runs analyzed together (a sweep in one lakehouse) fall on different days,
# so one run's infrastructure events are never ranked as causes of another run's findings.
START_DAYS = 36_525


def start_day(seed: int, run_id: str) -> int:
    """The day (counted from T0_US) a run starts on: a stable hash of its seed and run id."""
    digest = hashlib.blake2b(f"{seed}/{run_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % START_DAYS


@dataclass(frozen=True)
class Scenario:
    """One simulated run. `name` is a SCENARIOS entry; kill-bookies uses `kill_count`."""

    name: str
    run_id: str
    ensemble: int = 2
    write_quorum: int = 2
    ack_quorum: int = 1
    bookies: int = 3
    brokers: int = 3
    messages: int = 2000
    dedup: bool = False
    seed: int = 1
    partitions: int = 0  # 0: a non-partitioned topic with one producer
    kill_count: int = 1
    fault_at: float = 0.5  # the fault happens when this fraction of the messages was sent
    interval_us: int = 1000  # the producer's send loop: one send per interval
    latency_us: int = 2000  # least send → ack latency; up to 0.9 interval of jitter on top
    ack_return_us: int = 300  # entry persisted by Qa bookies → ack seen by the client
    in_flight: int = 1000  # max pending messages (block_if_queue_full)
    send_timeout_us: int = 30_000_000
    session_timeout_us: int = 30_000_000  # metadata (ZooKeeper) session timeout
    # isolate-broker: what the owner does when its session expires. "shutdown": it stops at
    # once, sends it persisted but never acked are resent (duplicates without dedup);
    # "reconnect" (Pulsar 4.0's default, the real data set's cluster): it keeps serving and
    # closes its topics cleanly when it gives the bundle up, so nothing is stored unacked.
    session_expired: str = "shutdown"
    # kill-bookie / kill-bookies: 0 keeps the killed bookies down; > 0 restarts them this long
    # after the kill with their data, as the harness does (chaos.BOOKIE_DOWN_S, 12 s). With a
    # restart, fewer than E bookies may be left: the producer then stalls until they return.
    bookie_restart_us: int = 0
    partition_hold_us: int = 20_000_000  # partition-broker-from-bookies: how long it is held
    entries_per_ledger: int = 50_000
    redeliver_every: int = 500  # sub-1 fails to ack one message in this many (0: never)
    early_stop: float = 0.0  # >0: a reader that stops after this fraction, without `end`
    auto_skip: bool = False  # add a reader on a broker with autoSkipNonRecoverableData=true
    callback_reorder_every: int = 0  # >0: the harness records 1 ack pair in N out of order
    shared_crash: float = 0.0  # >0: sub-shared, whose shared-b leaves after this fraction
    failover_crash: float = 0.0  # >0: sub-failover, whose active consumer leaves after it
    failover_bug: str = ""  # "overlap": the old active consumer keeps receiving a little longer
    keys: int = 0  # >0: message seq has key k<hash(seq) mod keys> (trace format v1.1)
    # >0: sub-keyshared with this many consumers (key_shared.py: mode, ranges, churn, bug)
    key_shared_consumers: int = 0
    key_shared_mode: str = "auto_split"
    key_shared_ranges: tuple[int, ...] = ()
    key_shared_join: float = 0.0
    key_shared_leave: float = 0.0
    key_shared_bug: str = ""  # "reorder": apache/pulsar's ordering bug on a join
    topic: str = "persistent://public/default/sim"
    t0_us: int = 0  # the first send; 0: 10:00 UTC of day start_day(seed, run_id) from T0_US
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.t0_us:  # frozen: set once, here
            object.__setattr__(self, "t0_us", T0_US + start_day(self.seed, self.run_id) * DAY_US)

    @property
    def streams(self) -> int:
        return max(self.partitions, 1)

    @property
    def fault_seq(self) -> int:
        return int(self.messages * self.fault_at)

    @property
    def key_shared(self) -> KeyShared | None:
        if not self.key_shared_consumers:
            return None
        return KeyShared(
            self.key_shared_consumers,
            self.key_shared_mode,
            self.key_shared_ranges,
            self.key_shared_join,
            self.key_shared_leave,
            self.key_shared_bug,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_config(text: str) -> tuple[int, int, int]:
    """'E-Qw-Qa' → (E, Qw, Qa), refusing anything but E ≥ Qw ≥ Qa ≥ 1."""
    match = re.fullmatch(r"(\d+)-(\d+)-(\d+)", text.strip())
    if not match:
        raise UsageError(f"--config must be E-Qw-Qa, e.g. 2-2-1; got {text!r}")
    e, qw, qa = (int(g) for g in match.groups())
    if not e >= qw >= qa >= 1:
        raise UsageError(f"--config {text}: expected E >= Qw >= Qa >= 1")
    return e, qw, qa


def parse_scenario(text: str) -> tuple[str, int]:
    """'kill-bookies:2' → ('kill-bookies', 2); other names take no count."""
    name, _, count = text.partition(":")
    if name not in SCENARIOS:
        raise UsageError(f"unknown scenario {text!r}; expected one of {', '.join(SCENARIOS)}")
    if count and name != "kill-bookies":
        raise UsageError(f"scenario {name} takes no ':N' (only kill-bookies:N does)")
    if name == "kill-bookies":
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"kill-bookies needs a count >= 1, e.g. kill-bookies:2; got {text!r}")
        return name, int(count)
    return name, 1


def bookies_killed(s: Scenario) -> int:
    """How many bookies the scenario kills (0 for the faults that kill none), all of them
    members of the written ensemble; a wipe kills them too, and they come back empty."""
    one, quorum = ("kill-bookie", "wipe-bookie-disk"), ("kill-qw-bookies", "wipe-qw-bookies-disk")
    if s.name in one:
        return 1
    if s.name in quorum:
        return s.write_quorum
    return s.kill_count if s.name == "kill-bookies" else 0


def with_needed_bookies(s: Scenario) -> Scenario:
    """The scenario on the fewest bookies it runs on, at least DEFAULT_BOOKIES: an ensemble of
    E, plus the killed bookies when they stay down (a new ensemble must be possible)."""
    staying_down = 0 if s.bookie_restart_us else bookies_killed(s)
    return replace(s, bookies=max(DEFAULT_BOOKIES, s.ensemble + staying_down))


def validate(s: Scenario) -> Scenario:
    """Refuse a scenario the model cannot run faithfully, naming the limit."""
    if s.name not in SCENARIOS:
        raise UsageError(f"unknown scenario {s.name!r}; expected one of {', '.join(SCENARIOS)}")
    if not s.ensemble >= s.write_quorum >= s.ack_quorum >= 1:
        raise UsageError("expected E >= Qw >= Qa >= 1")
    if s.bookies < s.ensemble:
        raise UsageError(f"{s.bookies} bookies cannot hold an ensemble of E={s.ensemble}")
    if s.name in DISK_WIPES and not s.bookie_restart_us:
        raise UsageError(
            f"{s.name}: a wiped bookie restarts empty; give the restart (bookie_restart_ms, "
            "the harness: 12000)"
        )
    lost = bookies_killed(s)
    if lost > s.ensemble:
        raise UsageError(f"{s.name}: cannot kill {lost} bookies of an ensemble of {s.ensemble}")
    if s.session_expired not in SESSION_EXPIRED_POLICIES:
        raise UsageError(
            f"session_expired must be one of {', '.join(SESSION_EXPIRED_POLICIES)}, "
            f"got {s.session_expired!r}"
        )
    if s.bookie_restart_us and s.bookie_restart_us <= s.session_timeout_us:
        raise UsageError(
            "bookie_restart must exceed the session timeout: the model restarts a killed bookie "
            "after its registration expired (the harness: 12 s down, 10 s sessions)"
        )
    if lost and s.bookies - lost < s.ensemble and not s.bookie_restart_us:
        raise UsageError(
            f"{s.name}: {s.bookies} bookies minus {lost} killed leave fewer than E={s.ensemble}; "
            "the model needs a new ensemble to be possible (use more --bookies, or restart "
            "the killed bookies: bookie_restart_ms)"
        )
    if s.name == BOOKIE_PARTITION and s.partition_hold_us <= 0:
        raise UsageError(f"partition_hold must be > 0, got {s.partition_hold_us} us")
    if s.name in OWNER_CHANGES and s.brokers < 2:
        raise UsageError(f"{s.name} needs at least 2 brokers, got {s.brokers}")
    if s.messages < 10:
        raise UsageError(f"--messages must be >= 10, got {s.messages}")
    if s.latency_us <= s.interval_us:
        raise UsageError(
            "latency_us must exceed interval_us (the producer always has a message in flight)"
        )
    if s.in_flight * s.interval_us >= s.send_timeout_us:
        raise UsageError("in_flight × interval_us must be below the send timeout")
    if s.callback_reorder_every == 1 or s.callback_reorder_every < 0:
        raise UsageError("callback_reorder_every must be 0 (off) or >= 2")
    for name, fraction in (("shared_crash", s.shared_crash), ("failover_crash", s.failover_crash)):
        if not 0 <= fraction < 1:
            raise UsageError(f"{name} must be 0 (off) or in (0, 1), got {fraction}")
    if s.key_shared_consumers < 0:
        raise UsageError(f"key_shared consumers must be >= 0, got {s.key_shared_consumers}")
    check(s.key_shared, s.keys, s.failover_crash, s.failover_bug)
    if not 0 < s.fault_at < 1:
        raise UsageError(f"fault_at must be in (0, 1), got {s.fault_at}")
    return s


def scenario_from(values: dict[str, Any]) -> Scenario:
    """A Scenario from CLI or grid values (names as the CLI options, '-' or '_')."""
    v = {k.replace("-", "_"): x for k, x in values.items() if x is not None}
    name, count = parse_scenario(str(v["scenario"]))
    e, qw, qa = parse_config(str(v.get("config", "2-2-1")))
    seed = int(v.get("seed", 1))
    label = f"{name}-{count}" if name == "kill-bookies" else name
    return Scenario(
        name=name,
        kill_count=count,
        run_id=v.get("run_id") or f"sim-{label}-{seed}",
        ensemble=e,
        write_quorum=qw,
        ack_quorum=qa,
        bookies=int(v.get("bookies", DEFAULT_BOOKIES)),
        brokers=int(v.get("brokers", 3)),
        messages=int(v.get("messages", 2000)),
        partitions=int(v.get("partitions", 0)),
        dedup=bool(v.get("dedup", False)),
        seed=seed,
        fault_at=float(v.get("fault_at", 0.5)),
        in_flight=int(v.get("in_flight", 1000)),
        interval_us=int(v.get("interval_us", 1000)),
        latency_us=int(v.get("latency_us", 2000)),
        ack_return_us=int(v.get("ack_return_us", 300)),
        session_timeout_us=int(v.get("session_timeout_ms", 30_000)) * 1000,
        session_expired=str(v.get("session_expired", "shutdown")),
        bookie_restart_us=int(v.get("bookie_restart_ms", 0)) * 1000,
        partition_hold_us=int(v.get("partition_hold_ms", 20_000)) * 1000,
        entries_per_ledger=int(v.get("entries_per_ledger", 50_000)),
        early_stop=float(v.get("early_stop", 0.0)),
        auto_skip=bool(v.get("auto_skip", False)),
        redeliver_every=int(v.get("redeliver_every", 500)),
        callback_reorder_every=int(v.get("callback_reorder_every", 0)),
        shared_crash=float(v.get("shared_crash", 0.0)),
        failover_crash=float(v.get("failover_crash", 0.0)),
        failover_bug=str(v.get("failover_bug") or ""),
        keys=int(v.get("keys", 0)),
        **flat_options(v),
        t0_us=int(v.get("t0_us", 0)),
    )
