"""The driver-side protocol plan: the few infrastructure facts of a run (owners, ledgers,
fragments and ensembles, the fault and the client's reconnect), never per-message data.

Per stream (a partition and its producer) the plan fixes, for the one owner change a
scenario may have:

- `a`: the first message still unacknowledged when the connection is lost at `t_fault`;
- `written`: how many of the pending messages the old owner had persisted (Qa bookies
  acked) without the client seeing the ack — they stay in the old ledger, which recovery
  closes at its last add confirmed (LAC);
- `t_reconnect`: when the client's backoff reaches the new owner;
- `pre`: messages sent before `t_reconnect` (window `in_flight`, block_if_queue_full); each
  message still pending `send_timeout` after its send fails with Timeout and frees its slot;
- the messages pending at `t_reconnect` are resent and acked in one burst, in order; with
  deduplication the new owner drops those already stored and answers −1:−1.

Messages are stored in two epochs: epoch 0 = seq [0, a + written) on the first owner's
ledgers, epoch 1 = seq [new_lo, messages) on the new owner's (rollover every
`entries_per_ledger` entries). Seq in both epochs is stored twice: a duplicate block.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from simulate.backoff import latency, reconnect_after
from simulate.scenario import (
    BOOKIE_FAULTS,
    BOOKIE_PARTITION,
    DISK_WIPES,
    OWNER_CHANGES,
    Scenario,
    bookies_killed,
)

BURST_STEP_US = 1  # the new owner acks resent messages back to back
# A cut link is held past the metadata session it cuts (so the session really expires), then
# healed, like the harness's network faults (chaos.DEFAULT_HOLD_S, 20 s, over 10 s sessions).
HEAL_AFTER_EXPIRY_US = 5_000_000
LEDGER_BASE = 10  # ledger ids below are the namespace's own (cursors, schemas)
NAMESPACE = "public/default"
BUNDLE_RANGE = "0x00000000_0x40000000"  # the topic's bundle: the first of the namespace's 4
# Chaos actions that kill bookies, as the harness records them (kill-bookies with ':N').
BOOKIE_KILLS = ("kill-bookie", "kill-bookies", "kill-qw-bookies", *DISK_WIPES)
QUORUM_KILLS = ("kill-qw-bookies", "wipe-qw-bookies-disk")  # the Qw bookies of the next entry
# After the bookies are reachable again (a restarted bookie started, a partition healed) the
# producer's writes resume about 6 s later: the real data set's stalls ended 5.8–6.4 s after
# the harness restarted the bookies (kill-bookies:2, 17.8 and 18.3 s outages with 12 s down) or
# healed the partition (partition-broker-from-bookies, 26.1–26.4 s with a 20 s hold).
RESUME_AFTER_US = (5_500_000, 6_500_000)


def restarts_bookies(s: Scenario) -> bool:
    """Whether the killed bookies restart `bookie_restart_us` after the kill, before any
    consumer reads (kill-qw-bookies' return is set by the reads, as before); with their data
    unless their disks were wiped (keeps_copies)."""
    return s.bookie_restart_us > 0 and s.name in ("kill-bookie", "kill-bookies", *DISK_WIPES)


def keeps_copies(s: Scenario) -> bool:
    """Whether the restarted bookies bring their copies back (not after a disk wipe)."""
    return restarts_bookies(s) and s.name not in DISK_WIPES


def stall_us(s: Scenario, rng: random.Random) -> int:
    """How long the producer gets no ack after the fault, when the fault stops all writes: 0
    when it does not.

    Fewer than E bookies left (possible only with a restart): no new ensemble can replace the
    killed bookies, BookKeeper closes the ledger and the managed ledger cannot create another
    until they are back; kill-qw-bookies' bookies return only after the producer stopped, so
    its pending sends time out. A broker cut off from its bookies writes again after the heal.
    """
    if s.name == BOOKIE_PARTITION:
        return s.partition_hold_us + rng.randrange(*RESUME_AFTER_US)
    killed = bookies_killed(s)
    if not killed or s.bookies - killed >= s.ensemble:
        return 0
    if s.name == "kill-qw-bookies":  # until every send (one window per timeout) timed out
        windows = -(-(s.messages - s.fault_seq + 1) // s.in_flight)
        return (windows + 1) * s.send_timeout_us + 1_000_000
    return s.bookie_restart_us + rng.randrange(*RESUME_AFTER_US)


def is_bookie_kill(action: str) -> bool:
    """Whether a recorded chaos action ('kill-bookies:2', 'kill-qw-bookies') kills bookies."""
    return action.partition(":")[0] in BOOKIE_KILLS


def bookie_action(s: Scenario) -> str:
    """The action the harness (capture/chaos.py) records for a bookie scenario: its
    ChaosSpec label, 'kill-bookies:N' with its count."""
    if s.name == "isolate-bookie":
        return "isolate-bookie-from-zk"
    return f"kill-bookies:{s.kill_count}" if s.name == "kill-bookies" else s.name


@dataclass
class StreamPlan:
    """One partition's producer: its owner change, if any, as plain numbers."""

    stream: int
    a: int  # first message pending at the fault (= messages when there is no fault)
    written: int = 0
    t_fault: int = 0
    t_reconnect: int = 0
    pre: int = 0  # messages sent before the reconnect: seq [a, a + pre)
    resent: int = 0  # of those, pending at the reconnect: seq [a + pre - resent, a + pre)
    new_lo: int = 0  # first seq stored in epoch 1
    t_resume: int = 0  # first send after the pre-reconnect ones (seq a + pre)
    epoch0_ledgers: int = 0


@dataclass
class Fragment:
    """Entries [first_entry, end_entry) of ledger index `ledger` are striped over `ensemble`."""

    ledger: int
    first_entry: int
    end_entry: int
    ensemble: list[str]


@dataclass
class Plan:
    scenario: Scenario
    streams: list[StreamPlan]
    owners: list[dict[str, Any]]  # {"from_us", "broker"}
    fragments: list[Fragment]
    killed: list[str]  # bookies killed by the fault
    returned: bool  # whether the killed bookies come back (with their data) before sub-1 reads
    reconnect: dict[str, Any]  # attempts, delays, available_after_us
    faults: list[dict[str, Any]] = field(default_factory=list)
    autorecovery: list[dict[str, Any]] = field(default_factory=list)
    # the last ledger (index) written before the bookie fault: only its and earlier ledgers'
    # copies sit on the killed bookies (ledgers made once they are back hold new copies)
    fault_ledger: int = -1

    def ledger_id(self, ledger_index: int, stream: int) -> int:
        return LEDGER_BASE + ledger_index * self.scenario.streams + stream

    def as_dict(self) -> dict[str, Any]:
        return {
            "streams": [asdict(s) for s in self.streams],
            "owners": self.owners,
            "fragments": [asdict(f) for f in self.fragments],
            "killed_bookies": self.killed,
            "killed_bookies_return": self.returned,
            "reconnect": self.reconnect,
            "faults": self.faults,
            "autorecovery": self.autorecovery,
        }


def send_time(s: Scenario, seq: int) -> int:
    """When `seq` is sent while nothing has blocked the producer yet."""
    return s.t0_us + seq * s.interval_us


def _available_after(s: Scenario, rng: random.Random) -> int:
    """How long after the client loses its connection the topic can be served again."""
    load = rng.randrange(20_000, 150_000)  # lookup, ownership, ledger recovery, topic load
    if s.name == "unload":
        return rng.randrange(20_000, 400_000)  # 'Unloading … completed in X ms', then load
    if s.name == "transfer":
        return rng.randrange(10_000, 60_000)  # PIP-307: the client is told the new owner
    if s.name == "kill-broker":
        return s.session_timeout_us + load  # the dead owner's lock lives until its session ends
    return load  # isolate-broker: its session already expired, the lock is free


def _stream_plan(s: Scenario, stream: int, t_fault: int, reconnect_us: int) -> StreamPlan:
    f = s.fault_seq
    a = f
    while (
        a > 0
        and send_time(s, a - 1) + latency(s.seed, stream, a - 1, s.latency_us, s.interval_us)
        > t_fault
    ):
        a -= 1
    persisted = 0
    # an unload, a clean close (session_expired=reconnect) or a bookie stall fails or keeps
    # its pending adds; a stopped owner leaves some stored without their acks sent
    stops = s.name == "kill-broker" or (
        s.name == "isolate-broker" and s.session_expired == "shutdown"
    )
    if stops:
        for seq in range(a, f + 1):
            ack = send_time(s, seq) + latency(s.seed, stream, seq, s.latency_us, s.interval_us)
            if ack - s.ack_return_us <= t_fault:
                persisted += 1
    t_r = t_fault + reconnect_us
    timeout = s.send_timeout_us
    nominal = [send_time(s, a + i) for i in range(s.in_flight)]
    pre = sum((t_r - n) // timeout + 1 for n in nominal if n < t_r)
    resent = sum(1 for n in nominal if n < t_r)
    blocked = resent == s.in_flight
    timed_out = pre > resent
    new_lo = a + pre - resent
    if s.dedup and not timed_out:
        new_lo = a + persisted
    t_resume = t_r + s.latency_us if blocked else send_time(s, a + pre)
    return StreamPlan(
        stream=stream,
        a=a,
        written=persisted,
        t_fault=t_fault,
        t_reconnect=t_r,
        pre=pre,
        resent=resent,
        new_lo=new_lo,
        t_resume=t_resume,
        epoch0_ledgers=-(-(a + persisted) // s.entries_per_ledger),
    )


def _quiet_stream(s: Scenario, stream: int) -> StreamPlan:
    return StreamPlan(
        stream=stream,
        a=s.messages,
        new_lo=s.messages,
        t_resume=send_time(s, s.messages),
        epoch0_ledgers=-(-s.messages // s.entries_per_ledger),
    )


def build_plan(s: Scenario) -> Plan:
    """Everything about the run that is not per message, from the seed alone."""
    rng = random.Random(s.seed)
    brokers = [f"broker-{n}" for n in range(s.brokers)]
    bookies = [f"bookie-{n}" for n in range(s.bookies)]
    first_owner = rng.choice(brokers)
    owners = [{"from_us": s.t0_us - 1_000_000, "broker": first_owner}]
    t_fault = send_time(s, s.fault_seq) + s.interval_us // 2
    faults: list[dict[str, Any]] = []
    reconnect: dict[str, Any] = {}
    stalled = 0
    if s.name in OWNER_CHANGES:
        available = _available_after(s, rng)
        if s.name == "transfer":
            waited, delays = available, []
        else:
            waited, delays = reconnect_after(rng, available)
        connect = rng.randrange(1_000, 3_000)
        reconnect = {
            "attempts": len(delays),
            "delays_us": delays,
            "available_after_us": available,
            "reconnect_after_us": waited + connect,
        }
        new_owner = rng.choice([b for b in brokers if b != first_owner])
        owners.append({"from_us": t_fault + available, "broker": new_owner})
        streams = [_stream_plan(s, k, t_fault, waited + connect) for k in range(s.streams)]
        action = {"isolate-broker": "isolate-broker-from-zk"}.get(s.name, s.name)
        started = t_fault - s.session_timeout_us if s.name == "isolate-broker" else t_fault
        moves_bundle = s.name in ("unload", "transfer")
        faults.append(
            {
                "action": action,
                # the harness names the bundle it unloads or transfers, else the broker it hits
                "target": f"{NAMESPACE}/{BUNDLE_RANGE}" if moves_bundle else first_owner,
                "broker": first_owner,  # the bundle's owner when the fault hits
                "ts_us": started,
                "effect_us": t_fault,
                "new_owner": new_owner,
                # the session expired at t_fault; the harness heals the link a while later
                "end_us": t_fault + HEAL_AFTER_EXPIRY_US if s.name == "isolate-broker" else None,
            }
        )
    elif stalled := stall_us(s, rng):
        streams = [_stream_plan(s, k, t_fault, stalled) for k in range(s.streams)]
        if s.name == BOOKIE_PARTITION:
            faults.append(
                {
                    "action": s.name,
                    "target": first_owner,
                    "broker": first_owner,
                    "ts_us": t_fault,
                    "effect_us": t_fault,
                    "end_us": t_fault + s.partition_hold_us,
                }
            )
    else:
        streams = [_quiet_stream(s, k) for k in range(s.streams)]
    fragments, killed, returned, recovery, fault_ledger = _bookie_layout(
        s, rng, bookies, streams, t_fault, faults, stalled=bool(stalled)
    )
    return Plan(
        s, streams, owners, fragments, killed, returned, reconnect, faults, recovery, fault_ledger
    )


def _bookie_layout(
    s: Scenario,
    rng: random.Random,
    bookies: list[str],
    streams: list[StreamPlan],
    t_fault: int,
    faults: list[dict[str, Any]],
    stalled: bool = False,
):  # noqa: ANN202
    """Ledgers' fragments and ensembles; the bookie fault splits the ledger being written.

    stalled: the fault stopped all writes: the ledger being written ends at the last entry
    before it (a new ledger follows when writes resume), so a bookie fault hits the last
    ledger of the first epoch, unsplit, and the ledgers after it see every bookie again."""
    stream = streams[0]
    ledgers = stream.epoch0_ledgers + (
        0
        if stream.new_lo >= s.messages
        else -(-(s.messages - stream.new_lo) // s.entries_per_ledger)
    )
    fault_ledger, fault_entry = divmod(s.fault_seq + 1, s.entries_per_ledger)
    if stalled:
        fault_ledger, fault_entry = stream.epoch0_ledgers - 1, 0
    killed: list[str] = []
    fragments: list[Fragment] = []
    down: set[str] = set()
    recovery: list[dict[str, Any]] = []
    for index in range(ledgers):
        size = _ledger_size(s, stream, index)
        ensemble = rng.sample([b for b in bookies if b not in down], s.ensemble)
        if s.name in BOOKIE_FAULTS and index == fault_ledger and (stalled or fault_entry < size):
            if s.name in QUORUM_KILLS:
                killed = [
                    ensemble[(fault_entry - 1 + j) % s.ensemble] for j in range(s.write_quorum)
                ]
            elif s.name == "isolate-bookie":
                killed = []
            else:
                killed = rng.sample(ensemble, s.kill_count)
            target = killed or [rng.choice(ensemble)]
            faults.append(
                {
                    "action": bookie_action(s),
                    "target": ",".join(target),
                    "ts_us": t_fault,
                    "effect_us": t_fault,
                    # killed bookies that return: consumers.with_bookies_return sets it
                    "end_us": t_fault + s.session_timeout_us + HEAL_AFTER_EXPIRY_US
                    if s.name == "isolate-bookie"
                    else (t_fault + s.bookie_restart_us if restarts_bookies(s) else None),
                }
            )
            if killed and not stalled:
                down = set(killed)
                fragments.append(Fragment(index, 0, fault_entry, ensemble))
                available = [b for b in bookies if b not in down and b not in ensemble]
                replaced = [
                    b if b not in down else available.pop(rng.randrange(len(available)))
                    for b in ensemble
                ]
                fragments.append(Fragment(index, fault_entry, s.entries_per_ledger, replaced))
                continue
        fragments.append(Fragment(index, 0, s.entries_per_ledger, ensemble))
    # ledgers created after the fault (a stall's, once the bookies are back) lost nothing
    for fragment in (f for f in fragments if f.ledger <= fault_ledger):
        lost = [b for b in fragment.ensemble if b in killed]
        if lost:
            # a restarted bookie brings its copies back: the auditor finds them again
            possible = keeps_copies(s) or (len(lost) < s.ack_quorum and len(lost) < s.write_quorum)
            recovery.append(
                {
                    "ledger_index": fragment.ledger,
                    "first_entry": fragment.first_entry,
                    "lost_bookies": lost,
                    "re_replicable": possible,
                    "why": "the lost bookies restarted with their copies"
                    if keeps_copies(s)
                    else "a readable copy survives and the ledger can be closed"
                    if possible
                    else f"{len(lost)} of the ensemble lost with Qa={s.ack_quorum}: close "
                    "cannot decide the last entry (or no copy survives)",
                }
            )
    returned = s.name == "kill-qw-bookies" or keeps_copies(s)  # back with their copies
    return fragments, killed, returned, recovery, fault_ledger


def _ledger_size(s: Scenario, stream: StreamPlan, index: int) -> int:
    """Entries in ledger `index` of the stream (epoch 0 ledgers first, then epoch 1's)."""
    per = s.entries_per_ledger
    if index < stream.epoch0_ledgers:
        total = stream.a + stream.written
        return min(per, total - index * per)
    total = s.messages - stream.new_lo
    return min(per, total - (index - stream.epoch0_ledgers) * per)
