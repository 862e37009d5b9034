"""What each process logs and what ZooKeeper records during a simulated run (driver-side)."""

from __future__ import annotations

from typing import Any

from simulate.infra import (
    BUNDLE,
    Story,
    _bookie,
    _broker_addr,
    ledger_path,
    managed_ledger,
    policy_snapshot,
    topic_name,
    zk_row,
)
from simulate.plan import Plan, is_bookie_kill, send_time
from simulate.scenario import BOOKIE_PARTITION
from simulate.story_bookies import bookie_fault, bookie_partition
from simulate.trace import producer_name

MS = 1000


def tell(plan: Plan) -> Story:
    """The whole run's infrastructure story."""
    story = Story(plan)
    s = plan.scenario
    owner = plan.owners[0]["broker"]
    story.zk.extend(policy_snapshot(s, s.t0_us - 71_000 * MS))
    for n in range(s.brokers):
        name = f"broker-{n}"
        story.broker(
            s.t0_us - 60_000 * MS,
            name,
            "BrokerService",
            f"Started Pulsar Broker service on /{_broker_addr(name)}:6650, "
            "TLS: (none), listener: (none)",
        )
        story.zk.append(
            zk_row(
                s.t0_us - 60_000 * MS,
                f"/loadbalance/brokers/{_broker_addr(name)}:8080",
                "create",
                {"pulsarServiceUrl": f"pulsar://{_broker_addr(name)}:6650"},
                ephemeral=True,
            )
        )
    for n in range(s.bookies):
        story.zk.append(
            zk_row(
                s.t0_us - 70_000 * MS,
                f"/ledgers/available/{_bookie(f'bookie-{n}')}",
                "create",
                ephemeral=True,
            )
        )
    _own(story, owner, s.t0_us - 10_000 * MS, first=True)
    _ledgers(story)
    for fault in plan.faults:
        kind = "kill-bookie" if is_bookie_kill(fault["action"]) else fault["action"]
        _FAULTS.get(kind, lambda *_: None)(story, fault)
        if fault.get("end_us") is not None:
            _fault_end(story, fault)
    return story


def _fault_end(story: Story, fault: dict[str, Any]) -> None:
    """After the harness undid a fault, what was down registers again: the killed bookies as
    they start (their data kept, or none after a disk wipe), an isolated bookie or broker
    restarted after the heal (it had shut down when its session expired)."""
    t = fault["end_us"]
    if fault["action"] == BOOKIE_PARTITION:
        return  # nothing stopped: the broker writes again (story_bookies.bookie_partition)
    if fault["action"] == "isolate-broker-from-zk":
        if story.plan.scenario.session_expired != "shutdown":
            return  # it never stopped
        name = fault["target"]
        story.broker(
            t + 8_000 * MS,
            name,
            "BrokerService",
            f"Started Pulsar Broker service on /{_broker_addr(name)}:6650, "
            "TLS: (none), listener: (none)",
        )
        path = f"/loadbalance/brokers/{_broker_addr(name)}:8080"
        data = {"pulsarServiceUrl": f"pulsar://{_broker_addr(name)}:6650"}
        story.zk.append(zk_row(t + 8_000 * MS, path, "create", data, ephemeral=True))
        return
    back = t + (3_000 * MS if fault["action"] == "isolate-bookie-from-zk" else 0)
    for bookie in fault["target"].split(","):
        story.zk.append(
            zk_row(back, f"/ledgers/available/{_bookie(bookie)}", "create", ephemeral=True)
        )


def _own(story: Story, broker: str, ts: int, first: bool) -> None:
    plan, s = story.plan, story.plan.scenario
    story.broker(
        ts,
        broker,
        "OwnershipCache",
        f"Successfully acquired ownership of OwnedBundle(bundle={BUNDLE}, isActive=1)",
    )
    story.zk.append(
        zk_row(
            ts,
            f"/namespace/{BUNDLE}",
            "create",
            {"nativeUrl": f"pulsar://{_broker_addr(broker)}:6650"},
            ephemeral=True,
        )
    )
    for stream in range(s.streams):
        story.broker(
            ts + 2 * MS,
            broker,
            "ManagedLedgerImpl",
            f"Opening managed ledger {managed_ledger(plan, stream)}",
        )
        dedup = "enabled" if s.dedup else "disabled"
        story.broker(
            ts + 30 * MS,
            broker,
            "BrokerService",
            f"Created topic {topic_name(plan, stream)} - dedup is {dedup}",
        )
        if s.dedup and not first:
            story.broker(
                ts + 20 * MS,
                broker,
                "MessageDeduplication",
                f"[{topic_name(plan, stream)}] Replaying 1 entries for deduplication",
            )


def _ledgers(story: Story) -> None:
    """Each ledger's creation (ensemble), rollover and ZooKeeper metadata."""
    plan, s = story.plan, story.plan.scenario
    per = s.entries_per_ledger
    for stream_plan in plan.streams:
        stream = stream_plan.stream
        ml = managed_ledger(plan, stream)
        previous = "null"
        for fragment in (f for f in plan.fragments if f.first_entry == 0):
            index = fragment.ledger
            epoch1 = index >= stream_plan.epoch0_ledgers
            if epoch1:
                first_seq = stream_plan.new_lo + (index - stream_plan.epoch0_ledgers) * per
                ts = max(stream_plan.t_reconnect, send_time(s, first_seq)) - MS
                owner = plan.owners[-1]["broker"]
            else:
                ts = send_time(s, index * per) - MS
                owner = plan.owners[0]["broker"]
            ledger = plan.ledger_id(index, stream)
            ensemble = ", ".join(_bookie(b) for b in fragment.ensemble)
            # a new owner opens the managed ledger afresh; a stalled one goes on after its last
            moved = epoch1 and index == stream_plan.epoch0_ledgers and len(plan.owners) > 1
            if previous != "null" and not moved:
                story.broker(
                    ts - MS,
                    owner,
                    "ManagedLedgerImpl",
                    f"[{ml}] Creating a new ledger after closed {previous}",
                )
            story.broker(
                ts, owner, "LedgerCreateOp", f"Ensemble: [{ensemble}] for ledger: {ledger}"
            )
            after = "null" if moved else previous
            story.broker(
                ts + MS,
                owner,
                "ManagedLedgerImpl",
                f"[{ml}] Created ledger {ledger} after closed {after}",
            )
            story.zk.append(
                zk_row(
                    ts,
                    ledger_path(ledger),
                    "create",
                    {"state": "OPEN", "segment_count": 1, "ensemble": ensemble},
                )
            )
            previous = str(ledger)


def _owner_change(story: Story, fault: dict[str, Any], recovered: bool) -> None:
    """The new owner takes the bundle; the clients' backoff; recovery of the old ledger."""
    plan, s = story.plan, story.plan.scenario
    new_owner, t_owner = plan.owners[-1]["broker"], plan.owners[-1]["from_us"]
    _own(story, new_owner, t_owner, first=False)
    for stream_plan in plan.streams:
        stream = stream_plan.stream
        t, name = fault["effect_us"], producer_name(stream, bool(s.partitions))
        for delay in plan.reconnect.get("delays_us", []):
            story.log(
                t + 1 * MS // 10,
                "client",
                "client",
                "HandlerBase:186",
                f"[{topic_name(plan, stream)}, {name}] "
                f"Schedule reconnection in {delay / 1e6:.3g} s",
            )
            t += delay
        story.log(
            stream_plan.t_reconnect,
            "client",
            "client",
            "ProducerImpl:222",
            f"[{topic_name(plan, stream)}, {name}] Created producer on broker "
            f"[10.0.0.50:52344 -> {_broker_addr(new_owner)}:6650] ",
        )
        if recovered:
            last = stream_plan.a + stream_plan.written - 1
            ledger = plan.ledger_id(last // s.entries_per_ledger, stream)
            entry = last % s.entries_per_ledger
            for bookie in plan.fragments[-1].ensemble[: s.write_quorum]:
                story.log(
                    t_owner - 5 * MS,
                    "bookie",
                    bookie,
                    "ReadEntryProcessor",
                    f"Ledger: {ledger}  fenced by: /{_broker_addr(new_owner)}:51234",
                    "WARN",
                )
            story.broker(
                t_owner - 2 * MS,
                new_owner,
                "ReadOnlyLedgerHandle",
                f"Closing recovered ledger {ledger} at entry {entry}",
            )
            story.zk.append(
                zk_row(t_owner - 6 * MS, ledger_path(ledger), "change", {"state": "IN_RECOVERY"}, 1)
            )
            story.zk.append(
                zk_row(t_owner - 2 * MS, ledger_path(ledger), "change", {"state": "CLOSED"}, 2)
            )


def _unload(story: Story, fault: dict[str, Any]) -> None:
    old, t = fault["broker"], fault["effect_us"]
    took = story.plan.owners[-1]["from_us"] - t
    story.broker(t - 8 * MS, old, "NamespacesBase", f"[null] Unloading namespace bundle {BUNDLE}")
    story.broker(t - 1 * MS, old, "OwnedBundle", f"Disabling ownership: {BUNDLE}")
    for stream in range(story.plan.scenario.streams):
        story.broker(t, old, "BrokerService", f"[{topic_name(story.plan, stream)}] Unloading topic")
        story.broker(
            t + MS, old, "PersistentTopic", f"[{topic_name(story.plan, stream)}] Topic closed"
        )
    story.broker(
        t + took // 2,
        old,
        "OwnedBundle",
        f"Unloading {BUNDLE} namespace-bundle with {story.plan.scenario.streams} "
        "topics completed in "
        f"{took / 2000:.1f} ms",
    )
    story.broker(
        t + took // 2, old, "LockManagerImpl", f"Released resource lock on /namespace/{BUNDLE}"
    )
    story.zk.append(zk_row(t + took // 2, f"/namespace/{BUNDLE}", "delete"))
    _owner_change(story, fault, recovered=False)


def _transfer(story: Story, fault: dict[str, Any]) -> None:
    old, t = fault["broker"], fault["effect_us"]
    took = story.plan.owners[-1]["from_us"] - t
    story.broker(
        t + took,
        old,
        "ServiceUnitStateChannelImpl",
        f"Unloading bundle:{BUNDLE} with {story.plan.scenario.streams} topics "
        f"completed in {took / 1000:.1f} ms",
    )
    story.zk.append(zk_row(t, f"/namespace/{BUNDLE}", "delete"))
    _owner_change(story, fault, recovered=False)


def _broker_gone(story: Story, fault: dict[str, Any], isolated: bool) -> None:
    s = story.plan.scenario
    old, t = fault["broker"], fault["effect_us"]
    expired = t if isolated else t + s.session_timeout_us
    if isolated:
        story.broker(
            fault["ts_us"], old, "ZKSessionWatcher", "ZooKeeper client is disconnected", "WARN"
        )
        story.broker(
            t - 5 * MS,
            old,
            "ZKSessionWatcher",
            "ZooKeeper session reconnection timeout. Notifying session is lost.",
            "WARN",
        )
        if s.session_expired == "shutdown":  # reconnect: it keeps serving, closes cleanly
            story.broker(t - 1 * MS, old, "PulsarService", "Closing PulsarService")
    story.zk.append(zk_row(expired, f"/namespace/{BUNDLE}", "delete"))
    story.zk.append(zk_row(expired, f"/loadbalance/brokers/{_broker_addr(old)}:8080", "delete"))
    _owner_change(story, fault, recovered=True)


_FAULTS = {
    "unload": _unload,
    "transfer": _transfer,
    "kill-broker": lambda story, f: _broker_gone(story, f, isolated=False),
    "isolate-broker-from-zk": lambda story, f: _broker_gone(story, f, isolated=True),
    "kill-bookie": bookie_fault,
    "isolate-bookie-from-zk": bookie_fault,
    BOOKIE_PARTITION: bookie_partition,
}
