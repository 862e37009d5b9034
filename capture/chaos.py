"""Chaos actions on a local Pulsar, triggered by the harness when the ack count reaches a mark.

Each action first resolves its target, then reports it (the harness records a `chaos` run event
with phase "start" before anything is done, so a crash mid-action still leaves the event), then
acts; a fault that is later undone (a link healed, a bookie restarted) reports phase "end".

Process faults kill (SIGKILL) or stop (SIGTERM) JVMs; network faults need a cluster whose
processes run in network namespaces (`cluster up --netns`) and cut links with iptables DROP
rules inside them (netns.py), leaving every process running.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from capture import disk_loss, process
from capture.admin import Admin, TopicName
from capture.netns import Network
from capture.processes import ClusterState, kill_and_restart, save_state, wait_ready
from pulsar_audit.errors import UsageError

log = logging.getLogger(__name__)

ACTIONS = (
    "unload",
    "transfer",
    "kill-broker",
    "kill-bookie",
    "stop-bookie",
    "kill-bookies",
    "kill-qw-bookies",
    "isolate-broker-from-zk",
    "isolate-bookie-from-zk",
    "partition-broker-from-bookies",
    "lossy-broker-bookies",
    "wipe-bookie-disk",
    "wipe-qw-bookies-disk",
    "wipe-qw-bookies-disk-in-turn",
)
NEEDS_MULTI = ACTIONS[2:]
NEEDS_NETNS = (
    "isolate-broker-from-zk",
    "isolate-bookie-from-zk",
    "partition-broker-from-bookies",
    "lossy-broker-bookies",
)
# Faults the harness undoes itself, between a read while the fault holds and a second read.
READ_WHILE_DOWN = ("kill-qw-bookies",)
# Disk loss (disk_loss.py): bookies killed, their directories and cookies deleted, restarted empty.
WIPES = ("wipe-bookie-disk", "wipe-qw-bookies-disk")
# The Qw bookies of the current ledger lose their disks one after the other, `hold_s` apart:
# the time AutoRecovery has to copy what the first one held before the next copy goes too
# (apache/pulsar#21987: a replication worker that never re-replicated).
IN_TURN = "wipe-qw-bookies-disk-in-turn"
# How long a killed or stopped bookie stays down before its restart: longer than its ZooKeeper
# session (BookKeeper's zkTimeout, 10 s by default), or the restarted bookie finds its old
# registration still there and shuts down (LockBusyException), leaving the cluster a bookie short.
BOOKIE_DOWN_S = 12.0
# How long a network fault holds by default: past the broker's or bookie's ZooKeeper session
# timeout (the network cluster uses 10 s), so that the session really expires.
DEFAULT_HOLD_S = 20.0
LOSS = 0.3  # fraction of packets dropped by lossy-broker-bookies
LOOKUP_AT = 0.6  # isolate-broker-from-zk: when (fraction of the hold) another broker is asked


@dataclass(frozen=True)
class ChaosSpec:
    action: str
    at_ack: int
    count: int = 1  # kill-bookies:N
    hold_s: float = DEFAULT_HOLD_S  # network faults: how long the link stays cut; IN_TURN:
    # how long after one bookie came back empty the next one is wiped

    @classmethod
    def parse(cls, text: str, hold_s: float = DEFAULT_HOLD_S) -> ChaosSpec:
        """ACTION[:N]@ACK_COUNT, e.g. unload@50000 or kill-bookies:2@5000."""
        head, _, count = text.partition("@")
        action, _, n = head.partition(":")
        valid = action in ACTIONS and count.isdigit() and int(count) >= 1
        valid = valid and (not n or (action == "kill-bookies" and n.isdigit() and int(n) >= 1))
        if not valid:
            raise UsageError(
                f"--chaos {text!r}: expected ACTION@ACK_COUNT with ACTION one of "
                f"{', '.join(ACTIONS)} (kill-bookies:N takes a count) and ACK_COUNT >= 1 "
                "(e.g. unload@50000, kill-bookies:2@5000)"
            )
        return cls(action, int(count), int(n or 1), hold_s)

    @property
    def label(self) -> str:
        return f"{self.action}:{self.count}" if self.action == "kill-bookies" else self.action


def parse_actions(texts: list[str], hold_s: float = DEFAULT_HOLD_S) -> tuple[ChaosSpec, ...]:
    """Several --chaos ACTION@ACK_COUNT, fired in the order given: their marks must not
    decrease (one waits for the other: an action starts once the one before it is done)."""
    specs = tuple(ChaosSpec.parse(text, hold_s) for text in texts)
    marks = [spec.at_ack for spec in specs]
    if marks != sorted(marks):
        raise UsageError(
            f"--chaos {' --chaos '.join(texts)}: the actions fire in the order given, so their "
            f"ACK_COUNTs must not decrease (got {', '.join(map(str, marks))})"
        )
    return specs


def describe(specs: tuple[ChaosSpec, ...]) -> str | None:
    """The actions as the run's config records them: ACTION@ACK_COUNT, comma-joined (one
    action reads as before: `unload@1000`); None without any."""
    return ",".join(f"{spec.label}@{spec.at_ack}" for spec in specs) or None


def check_possible(
    spec: ChaosSpec, state: ClusterState | None, config: tuple[int, int, int] | None = None
) -> None:
    """Refuse actions the cluster cannot take (killing a broker of a standalone kills it all);
    config: the run's E-Qw-Qa, checked against the cluster's bookies."""
    if spec.action in NEEDS_MULTI and (state is None or state.kind != "cluster"):
        raise UsageError(
            f"chaos action {spec.action} needs a multi-process cluster started by "
            "`pulsar-audit cluster up --brokers N --bookies N` (pass its --workdir)"
        )
    if spec.action == "transfer" and (state is None or state.load_manager != "extensible"):
        raise UsageError(
            "chaos action transfer needs the extensible load manager: `pulsar-audit cluster up "
            "--brokers 2 --load-manager extensible`"
        )
    if spec.action in NEEDS_NETNS and not state.network:
        raise UsageError(
            f"chaos action {spec.action} cuts network links: it needs a cluster started with "
            "`pulsar-audit cluster up --netns` (each process in its own network namespace)"
        )
    if config and state:
        disk_loss.check_quorum(spec.action, state, config)


Report = Callable[[str, dict], None]
Restore = Callable[[], None]


@dataclass
class Target:
    """What the action hits and how to find it again."""

    admin: Admin
    topic: TopicName
    state: ClusterState
    write_quorum: int = 1


def run_action(
    spec: ChaosSpec,
    admin: Admin,
    topic: TopicName,
    state: ClusterState | None,
    report: Report,
    write_quorum: int = 1,
) -> dict:
    """Resolve the target, report it, then act. Returns what happened; for READ_WHILE_DOWN
    faults its "restore" item undoes the fault (the harness calls it between two reads)."""
    started = time.monotonic()
    target = Target(admin, topic, state, write_quorum)
    result: dict = {"action": spec.label}
    if spec.action == "unload":
        bundle = admin.bundle_of(topic)
        report(f"{topic.ns_path}/{bundle}", {"bundle": bundle})
        admin.unload_bundle(topic, bundle)
    elif spec.action == "transfer":
        bundle, owner = admin.bundle_of(topic), _owning_broker(target)
        dest = next(b for b in state.by_role("broker") if b is not owner)
        report(f"{topic.ns_path}/{bundle}", {"bundle": bundle, "from": owner.name, "to": dest.name})
        admin.unload_bundle(topic, bundle, destination=dest.address("web"))
    elif spec.action == "kill-broker":
        victim = _owning_broker(target)
        report(victim.name, {"pid": victim.pid, "host": victim.host})
        kill_and_restart(state, [victim], signal.SIGKILL, down_s=0.0)
        report(victim.name, {"phase": "end", "restarted": True})
    elif spec.action in ("kill-bookie", "stop-bookie", "kill-bookies"):
        victims = _bookies_to_hit(target, spec.count if spec.action == "kill-bookies" else 1)
        report(_names(victims), _pids(victims))
        sig = signal.SIGTERM if spec.action == "stop-bookie" else signal.SIGKILL
        kill_and_restart(state, victims, sig, down_s=BOOKIE_DOWN_S)
        report(_names(victims), {"phase": "end", "restarted": True})
    elif spec.action == "kill-qw-bookies":
        victims = _bookies_to_hit(target, write_quorum)
        report(_names(victims), _pids(victims))
        killed_at = process.kill_all(victims, signal.SIGKILL)
        result["restore"] = _restore_one(state, victims, killed_at, report)
    elif spec.action in WIPES:
        victims = _bookies_to_hit(target, write_quorum if spec.action == WIPES[1] else 1)
        report(_names(victims), _pids(victims))
        killed_at = process.kill_all(victims, signal.SIGKILL)
        lost = disk_loss.lose_disks(state, victims, killed_at, BOOKIE_DOWN_S)
        report(_names(victims), {"phase": "end", "restarted": True, **lost})
    elif spec.action == IN_TURN:
        victims = _bookies_to_hit(target, write_quorum)
        result["turns"] = disk_loss.lose_in_turn(
            state, victims, spec.hold_s, BOOKIE_DOWN_S, report, partial(_reload, target)
        )
    else:
        _network_fault(spec, target, report)
    result["duration_s"] = round(time.monotonic() - started, 3)
    return result


def _reload(target: Target) -> str:
    """Unload the topic's bundle: the broker closes the ledger it writes, and reads it later
    through a new handle (with the ensembles AutoRecovery rewrote, not the writer's)."""
    bundle = target.admin.bundle_of(target.topic)
    target.admin.unload_bundle(target.topic, bundle)
    return bundle


def _names(specs: list[process.ProcessSpec]) -> str:
    return ",".join(spec.name for spec in specs)


def _pids(victims: list[process.ProcessSpec]) -> dict:
    if len(victims) == 1:
        return {"pid": victims[0].pid, "host": victims[0].host}
    return {"pids": [v.pid for v in victims], "count": len(victims)}


def _network_fault(spec: ChaosSpec, target: Target, report: Report) -> None:
    """Cut (or degrade) the links, hold for spec.hold_s, heal, restart whatever died."""
    state = target.state
    net = Network.from_dict(state.network)
    if spec.action == "isolate-broker-from-zk":
        victim, peers = _owning_broker(target), state.by_role("zookeeper")
    elif spec.action == "isolate-bookie-from-zk":
        [victim], peers = _bookies_to_hit(target, 1), state.by_role("zookeeper")
    else:  # partition / lossy link between the topic's broker and every bookie
        victim, peers = _owning_broker(target), state.by_role("bookie")
    details = {"host": victim.host, "from": _names(peers), "hold_s": spec.hold_s}
    report(victim.name, details)
    try:
        for peer in peers:
            if spec.action == "lossy-broker-bookies":
                net.lossy(victim.name, peer.name, LOSS)
            else:
                net.partition(victim.name, peer.name)
        if spec.action == "isolate-broker-from-zk":
            _lookup_elsewhere(spec, target, victim, report)
        else:
            time.sleep(spec.hold_s)
    finally:
        healed = net.heal()
    report(victim.name, {"phase": "end", "rules_removed": healed, "from": _names(peers)})
    _restart_dead(state)


def _lookup_elsewhere(
    spec: ChaosSpec, target: Target, victim: process.ProcessSpec, report: Report
) -> None:
    """Halfway through the isolation (past the victim's session timeout), look the topic up
    on another broker, as any new client would: with the old owner's ZooKeeper session gone,
    that broker takes the bundle and recovers (fences) the topic's ledger under the old owner,
    which still has the producer. Without a lookup, Pulsar 4.0 leaves the topic where it is
    and the old owner simply revalidates its lock once the link heals."""
    time.sleep(spec.hold_s * LOOKUP_AT)
    others = [b for b in target.state.by_role("broker") if b is not victim]
    outcome = {"phase": "lookup", "via": others[0].name if others else None}
    if others:
        try:
            outcome["owner"] = Admin(f"http://{others[0].address('web')}").owner_of(target.topic)
        except UsageError as exc:
            outcome["error"] = str(exc)[:200]
    report(victim.name, outcome)
    time.sleep(spec.hold_s * (1 - LOOKUP_AT))


def _restart_dead(state: ClusterState) -> None:
    """Start again any process of the cluster that died during a fault (e.g. a broker that
    shut down when it lost its metadata session)."""
    dead = [spec for spec in state.processes if not process.is_alive(spec.pid)]
    for spec in dead:
        log.warning("%s died during the fault; starting it again", spec.name)
        process.spawn(spec)
    if dead:
        save_state(state)
        wait_ready(state)


def _owning_broker(target: Target) -> process.ProcessSpec:
    owner = target.admin.owner_of(target.topic)  # pulsar://HOST:PORT
    address = owner.split("//")[-1].rstrip("/")
    for spec in target.state.by_role("broker"):
        if spec.address("broker") == address:
            return spec
    raise UsageError(f"topic owner {owner} is not a broker of {target.state.workdir}")


def _bookies_to_hit(target: Target, count: int) -> list[process.ProcessSpec]:
    """`count` bookies, those of the current ledger's ensemble first (in ensemble order)."""
    bookies = target.state.by_role("bookie")
    try:
        ensemble = target.admin.ledger_ensemble(target.topic)
    except UsageError:
        ensemble = []
    by_address = {spec.address("bookie"): spec for spec in bookies}
    chosen = [by_address[address] for address in ensemble if address in by_address]
    chosen += [spec for spec in bookies if spec not in chosen]
    return chosen[:count]


def _restore_one(
    state: ClusterState, victims: list[process.ProcessSpec], killed_at: float, report: Report
) -> Restore:
    """Undo kill-qw-bookies in two steps: the first call brings one bookie back (phase "end"),
    the second (`restore.rest()`) the others, so the cluster is whole for the next run."""

    def restore() -> None:
        time.sleep(max(0.0, BOOKIE_DOWN_S - (time.monotonic() - killed_at)))
        first = victims[0]
        process.spawn(first)
        save_state(state)
        report(first.name, {"phase": "end", "restarted": True, "still_down": _names(victims[1:])})

    def rest() -> None:
        for victim in victims[1:]:
            process.spawn(victim)
        save_state(state)

    restore.rest = rest  # type: ignore[attr-defined]
    return restore
