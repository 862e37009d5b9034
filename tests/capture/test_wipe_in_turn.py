"""The write quorum's disks lost one after the other (issue 27 item 3, apache/pulsar#21987),
without a cluster: the action's parsing, its scenario, what it refuses, the short auditor
checks of the AutoRecovery configuration, the brokers' ledger rollover, and the fault kind a
model sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture import multi
from capture.chaos import IN_TURN, ChaosSpec, check_possible
from capture.cluster import rollover_settings
from capture.disk_loss import conf_of
from capture.processes import ClusterState
from capture.scenarios import SCENARIOS, parse_scenario
from models.features import DISK_WIPES, FAULT_KINDS
from pulsar_audit.errors import UsageError


def _cluster(tmp_path: Path, bookies: int) -> ClusterState:
    return ClusterState("cluster", str(tmp_path), "pulsar://x:1", "http://x:2", 1, bookies)


def test_in_turn_parses_with_the_time_between_the_wipes() -> None:
    spec = ChaosSpec.parse(f"{IN_TURN}@900", hold_s=90.0)
    assert (spec.action, spec.at_ack, spec.hold_s, spec.label) == (IN_TURN, 900, 90.0, IN_TURN)
    with pytest.raises(UsageError, match="ACTION@ACK_COUNT"):
        ChaosSpec.parse(f"{IN_TURN}:2@900")  # the write quorum, never a count
    # E = Qw = Qa = 2 on 3 bookies: a third bookie for AutoRecovery to copy to
    assert parse_scenario(IN_TURN) == (IN_TURN, 2)
    assert SCENARIOS[IN_TURN] == (1, 3, "2-2-2")


def test_in_turn_refuses_a_write_quorum_with_no_bookie_to_copy_to(tmp_path: Path) -> None:
    spec = ChaosSpec.parse(f"{IN_TURN}@5")
    with pytest.raises(
        UsageError, match=f"{IN_TURN} at Qw = 3 would wipe every one of the cluster's 3 bookies"
    ):
        check_possible(spec, _cluster(tmp_path, 3), (3, 3, 2))
    check_possible(spec, _cluster(tmp_path, 3), (2, 2, 2))  # the bug's run


def test_autorecovery_configuration_has_short_auditor_checks(tmp_path: Path) -> None:
    spec = multi._autorecovery(
        tmp_path, 4181, 2181, "127.0.0.1", multi.Timeouts(), lambda name: ("127.0.0.1", None)
    )
    lines = conf_of(spec).read_text().splitlines()
    assert "auditorPeriodicCheckInterval=30" in lines
    assert "auditorPeriodicBookieCheckInterval=30" in lines
    assert "metadataServiceUri=metadata-store:zk:127.0.0.1:2181" in lines  # still a bookie's


def test_in_turn_is_a_disk_wipe_to_the_models() -> None:
    assert FAULT_KINDS[IN_TURN] == "kill-bookie"
    assert IN_TURN in DISK_WIPES


def test_ledger_entries_roll_a_ledger_at_once_and_nothing_by_default() -> None:
    assert rollover_settings(0) == {}
    # without the minimum time at 0 a ledger would not roll before 10 minutes, whatever N
    assert rollover_settings(100) == {
        "managedLedgerMaxEntriesPerLedger": "100",
        "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    }
