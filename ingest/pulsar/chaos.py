"""Chaos actions on a local Pulsar, triggered by the harness when the ack count reaches a mark.

Each action first resolves its target, then reports it (the harness records a `chaos` run event
before anything is done, so a crash mid-action still leaves the event), then acts.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from ingest.pulsar import cluster, process
from ingest.pulsar.admin import Admin, TopicName
from ingest.pulsar.cluster import ClusterState
from pulsar_audit.errors import UsageError

log = logging.getLogger(__name__)

ACTIONS = ("unload", "kill-broker", "kill-bookie", "stop-bookie")
NEEDS_MULTI = ("kill-broker", "kill-bookie", "stop-bookie")
# How long a killed or stopped bookie stays down before its restart: longer than its ZooKeeper
# session (BookKeeper's zkTimeout, 10 s by default), or the restarted bookie finds its old
# registration still there and shuts down (LockBusyException), leaving the cluster a bookie short.
BOOKIE_DOWN_S = 12.0


@dataclass(frozen=True)
class ChaosSpec:
    action: str
    at_ack: int

    @classmethod
    def parse(cls, text: str) -> ChaosSpec:
        """ACTION@ACK_COUNT, e.g. unload@50000."""
        action, _, count = text.partition("@")
        if action not in ACTIONS or not count.isdigit() or int(count) < 1:
            raise UsageError(
                f"--chaos {text!r}: expected ACTION@ACK_COUNT with ACTION one of "
                f"{', '.join(ACTIONS)} and ACK_COUNT >= 1 (e.g. unload@50000)"
            )
        return cls(action, int(count))


def check_possible(spec: ChaosSpec, state: ClusterState | None) -> None:
    """Refuse actions the cluster cannot take (killing a broker of a standalone kills it all)."""
    if spec.action in NEEDS_MULTI and (state is None or state.kind != "cluster"):
        raise UsageError(
            f"chaos action {spec.action} needs a multi-process cluster started by "
            "`pulsar-audit cluster up --brokers N --bookies N` (pass its --workdir)"
        )


Report = Callable[[str, dict], None]


def run_action(
    spec: ChaosSpec, admin: Admin, topic: TopicName, state: ClusterState | None, report: Report
) -> dict:
    """Resolve the target, `report(target, details)`, then act. Returns what happened."""
    started = time.monotonic()
    if spec.action == "unload":
        bundle = admin.bundle_of(topic)
        report(f"{topic.ns_path}/{bundle}", {"bundle": bundle})
        admin.unload_bundle(topic, bundle)
    elif spec.action == "kill-broker":
        victim = _owning_broker(admin, topic, state)
        report(victim.name, {"pid": victim.pid})
        _kill_and_restart(state, victim, signal.SIGKILL, down_s=0.0)
    else:
        victim = _bookie_to_hit(admin, topic, state)
        report(victim.name, {"pid": victim.pid})
        sig = signal.SIGKILL if spec.action == "kill-bookie" else signal.SIGTERM
        _kill_and_restart(state, victim, sig, down_s=BOOKIE_DOWN_S)
    return {"action": spec.action, "duration_s": round(time.monotonic() - started, 3)}


def _owning_broker(admin: Admin, topic: TopicName, state: ClusterState) -> process.ProcessSpec:
    owner = admin.owner_of(topic)  # pulsar://127.0.0.1:PORT
    port = int(owner.rsplit(":", 1)[1])
    for spec in state.by_role("broker"):
        if spec.ports.get("broker") == port:
            return spec
    raise UsageError(f"topic owner {owner} is not a broker of {state.workdir}")


def _bookie_to_hit(admin: Admin, topic: TopicName, state: ClusterState) -> process.ProcessSpec:
    """A bookie of the current ledger's ensemble when it can be found, else the first bookie."""
    bookies = state.by_role("bookie")
    try:
        ensemble = admin.ledger_ensemble(topic)
    except UsageError:
        ensemble = []
    for spec in bookies:
        if f"127.0.0.1:{spec.ports.get('bookie')}" in ensemble:
            return spec
    return bookies[0]


def _kill_and_restart(
    state: ClusterState, victim: process.ProcessSpec, sig: int, down_s: float
) -> None:
    """Signal the process, wait until it is gone, keep it down `down_s`, start it again."""
    process.kill(victim.pid, sig)
    if not process.wait_gone(victim.pid, 60.0):
        process.kill(victim.pid, signal.SIGKILL)
        process.wait_gone(victim.pid, 10.0)
    time.sleep(down_s)
    process.spawn(victim)
    cluster.save_state(state)
    log.info("restarted %s as pid %d", victim.name, victim.pid)
    if victim.role == "broker":
        cluster.wait_ready(state)
