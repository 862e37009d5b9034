"""What the brokers, the auditor and ZooKeeper record when bookies die or lose ZooKeeper, or
the owner broker loses its bookies."""

from __future__ import annotations

from typing import Any

from simulate.infra import Story, _bookie, ledger_path, under_replicated_path, zk_row
from simulate.plan import is_bookie_kill

MS = 1000


def bookie_fault(story: Story, fault: dict[str, Any]) -> None:
    plan, s = story.plan, story.plan.scenario
    t = fault["effect_us"]
    targets = fault["target"].split(",")
    expired = t + s.session_timeout_us
    owner = plan.owners[0]["broker"]
    if fault["action"] == "isolate-bookie-from-zk":
        story.log(
            t + 2_000 * MS,
            "bookie",
            targets[0],
            "ZooKeeperWatcherBase",
            "ZooKeeper client connection to the ZooKeeper server has expired!",
            "ERROR",
        )
    for bookie in targets:
        story.broker(
            expired,
            owner,
            "PulsarRegistrationClient",
            f"Bookie {_bookie(bookie)} deleted. path: /ledgers/available/{_bookie(bookie)}",
        )
        story.zk.append(zk_row(expired, f"/ledgers/available/{_bookie(bookie)}", "delete"))
    if not is_bookie_kill(fault["action"]):
        return
    split = [f for f in plan.fragments if f.first_entry > 0]
    for fragment in split:
        for stream in range(s.streams):
            ledger = plan.ledger_id(fragment.ledger, stream)
            ensemble = ", ".join(_bookie(b) for b in fragment.ensemble)
            for n, bookie in enumerate(targets):
                story.broker(
                    t + MS,
                    owner,
                    "PendingAddOp",
                    f"Failed to write entry ({ledger}, {fragment.first_entry}) to bookie ({n}, "
                    f"{_bookie(bookie)}): Bookie handle is not available",
                    "WARN",
                )
            story.broker(
                t + 5 * MS,
                owner,
                "LedgerHandle",
                f"New Ensemble: [{ensemble}] for ledger: {ledger}",
            )
            story.zk.append(
                zk_row(
                    t + 5 * MS,
                    ledger_path(ledger),
                    "change",
                    {"state": "OPEN", "segment_count": 2, "ensemble": ensemble},
                    1,
                )
            )
    for recovery in plan.autorecovery:
        for stream in range(s.streams):
            ledger = plan.ledger_id(recovery["ledger_index"], stream)
            lost = ", ".join(_bookie(b) for b in recovery["lost_bookies"])
            story.log(
                expired + 1_000 * MS,
                "bookie",
                "autorecovery",
                "Auditor",
                f"Following ledgers: [{ledger}] of bookie: [{lost}] "
                "are identified as underreplicated",
            )
            story.zk.append(
                zk_row(
                    expired + 1_000 * MS, under_replicated_path(ledger), "create", {"replica": lost}
                )
            )
            if recovery["re_replicable"]:
                story.log(
                    expired + 9_000 * MS,
                    "bookie",
                    "autorecovery",
                    "ReplicationWorker",
                    f"Ledger replicated successfully. ledger id is: {ledger}",
                )
                story.zk.append(
                    zk_row(expired + 9_000 * MS, under_replicated_path(ledger), "delete")
                )


def bookie_partition(story: Story, fault: dict[str, Any]) -> None:
    """The owner cannot reach its bookies: each add to the ledger being written fails on every
    bookie of its ensemble (the bookies stay registered: nothing in ZooKeeper changes)."""
    plan, s = story.plan, story.plan.scenario
    t = fault["effect_us"]
    for stream in plan.streams:
        index = max(stream.epoch0_ledgers - 1, 0)
        fragment = next(f for f in reversed(plan.fragments) if f.ledger == index)
        ledger = plan.ledger_id(index, stream.stream)
        entry = (stream.a + stream.written) - index * s.entries_per_ledger
        for n, bookie in enumerate(fragment.ensemble):
            story.broker(
                t + MS,
                fault["broker"],
                "PendingAddOp",
                f"Failed to write entry ({ledger}, {entry}) to bookie ({n}, {_bookie(bookie)}): "
                "Bookie handle is not available",
                "WARN",
            )
