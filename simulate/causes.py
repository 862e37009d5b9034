"""The true cause of each anomaly kind in a simulated run: the protocol step that made it."""

from __future__ import annotations

from typing import Any

from simulate import dispatch as D
from simulate.consumers import Consumer
from simulate.plan import Plan

# Infrastructure event types (pipelines/log_patterns.py) the simulated logs hold for a
# duplicate or an unacked message received.
DUPLICATE_EVENTS = [
    "ledger_recovery",
    "bundle_ownership_acquired",
    "broker_shutdown",
    "ledger_created",
]


def cause_of(
    plan: Plan, kind: str, consumer: Consumer | None, redispatched: bool = False
) -> dict[str, Any]:
    """The true cause of an anomaly kind in this run.

    redispatched: the block holds messages a consumer's disconnect sent to another one."""
    s = plan.scenario
    fault = plan.faults[0] if plan.faults else {}
    what = f"{fault.get('action')} of {fault.get('target')}"
    name = consumer.name if consumer else ""
    down = ", ".join(plan.killed)
    texts = {
        "duplicated": f"{what}: the old owner persisted these entries but the client never saw "
        "their acks; it resent them to the new owner, which wrote them again (deduplication off)",
        "unacked_received": f"{what}: persisted by the old owner (recovery closed the ledger at "
        "its LAC) but the client's send timed out before it reconnected",
        "redelivered": f"{name} did not ack them in time; the broker redelivered them",
        "poll_skip": f"all Qw={s.write_quorum} bookies of their fragment ({down}) were down and "
        f"the broker skipped the unreadable entries (autoSkipNonRecoverableData) for {name}",
        "lost": f"all Qw={s.write_quorum} bookies of their fragment ({down}) were down and "
        f"{name} read past them (autoSkipNonRecoverableData): acked data lost to it",
        "unseen": f"all Qw={s.write_quorum} bookies of a fragment ({down}) were down when {name} "
        "read: its acked entries are unreadable until they return and the reader blocks there",
    }
    if consumer is not None and consumer.stop_fraction and kind == "unseen":
        texts["unseen"] = f"{name} stopped after {consumer.stop_fraction:.0%} of the topic, no end"
    if consumer is not None and consumer.mode == "key_shared":
        texts.update(key_shared_causes(plan, consumer))
    elif consumer is not None and consumer.leaves:
        texts.update(two_consumer_causes(consumer, what, redispatched))
    events = DUPLICATE_EVENTS if kind in ("duplicated", "unacked_received") else []
    return {
        "kind": kind,
        "text": texts.get(kind, ""),
        "fault": fault.get("action"),
        "bookies": plan.killed if kind in ("unseen", "lost", "poll_skip") else [],
        "events": events,
    }


def two_consumer_causes(consumer: Consumer, what: str, redispatched: bool) -> dict[str, str]:
    """Why a Shared or Failover subscription got messages again, out of order, or on two
    consumers at once."""
    name, left = consumer.name, consumer.leaves
    gone = (
        f"consumer {left} disconnected after {consumer.crash_fraction:.0%} of the topic with "
        f"{D.UNACKED_WINDOW} messages received but not acked (its receiver queue)"
    )
    if consumer.mode == "shared":
        return {
            "redelivered": f"{gone}; the broker redelivered them to {name} under the same "
            "MessageIds (redelivery_count 1)",
            "shared_reordered": f"{gone}; the broker redelivered them to {name}, each after a "
            "higher seq it had already received (a Shared subscription does not keep order)"
            if redispatched
            else f"{what}: messages were written twice and the Shared dispatcher gave a second "
            "copy to a consumer that had not received the first, after higher seqs",
        }
    return {
        "redelivered": f"the active {gone.removeprefix('consumer ')}; the standby {name} took "
        "over from the mark-delete position and got them again, in order",
        "out_of_order": f"{name} took over inside messages that {what} had written twice: it "
        "reached their second copies after higher seqs, never having received the first",
        "failover_overlap": f"injected (failover_bug overlap): the broker kept dispatching to "
        f"{left} for {D.FAILOVER_OVERLAP_US / 1000:g} ms after the standby {name} became "
        "active, so both received the partition's messages at once",
    }


def key_shared_causes(plan: Plan, consumer: Consumer) -> dict[str, str]:
    """Why the Key_Shared subscription got messages again or a key out of order."""
    ks = plan.scenario.key_shared
    if ks is None:
        return {}
    joined = f"{ks.joiner} joined after {ks.join:.0%} of the topic" if ks.join else ""
    return {
        "redelivered": f"{ks.leaver} left after {ks.leave:.0%} of the topic with "
        f"{D.UNACKED_WINDOW} messages received but not acked; the broker redelivered them to "
        "the consumers now owning their keys, before newer messages of those keys",
        "key_out_of_order": f"injected (key_shared_bug reorder): {joined}; the broker moved "
        "keys to it while older messages of them were still in their old owner's receiver "
        f"queue, and gave those to the new owner {D.REDISPATCH_LAG} positions later, after "
        "newer messages of the same key (apache/pulsar 6554, 8292, 12885)",
        "stuck_key": f"injected (key_shared_bug reorder): {joined}; messages taken back from "
        "their old owner's receiver queue reached the new owner after messages acked later",
    }
