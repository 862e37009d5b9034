"""The labels scripts/duplicate_runs.py gives a real run before it happens (issue 27 items 2, 4)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from pulsar_audit.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))

from duplicate_runs import cluster_settings, expected  # noqa: E402
from keyshared_runs import keep_all  # noqa: E402


def _setup(chaos: str | None, config: str = "3-3-3", dedup: bool = False) -> dict:
    ensemble, write, ack = (int(n) for n in config.split("-"))
    return {
        "chaos": chaos,
        "ensemble_size": ensemble,
        "write_quorum": write,
        "ack_quorum": ack,
        "deduplication": dedup,
    }


@pytest.mark.parametrize(
    ("chaos", "config", "skip", "loss", "end"),
    [
        (None, "3-3-3", False, False, True),  # no fault
        ("wipe-bookie-disk@900", "3-3-3", False, False, True),  # Qa = Qw, one disk: a copy left
        ("wipe-bookie-disk@900", "3-3-2", True, False, True),
        ("wipe-bookie-disk@900", "1-1-1", False, True, False),  # Qw = 1: the only copy
        ("wipe-qw-bookies-disk@900", "3-3-3", True, True, True),  # every copy; skipped: the end
        ("wipe-qw-bookies-disk@900", "2-2-1", False, True, False),  # reads of the hole fail
        ("kill-broker@18000", "3-3-2", False, False, True),
        ("isolate-broker-from-zk@9000", "2-2-2", False, False, True),
        # several actions (capture run --chaos repeated): the loss of a later one counts
        ("unload@500,wipe-qw-bookies-disk@1000", "3-2-2", False, True, False),
        ("unload@500,wipe-bookie-disk@1000", "3-2-2", False, False, True),
        ("unload@500,wipe-bookie-disk@1000", "1-1-1", True, True, True),
    ],
)
def test_acked_loss_and_the_end_follow_from_the_fault_and_the_quorum(
    chaos: str | None, config: str, skip: bool, loss: bool, end: bool
) -> None:
    labels = expected(_setup(chaos, config), skip_lost_data=skip)
    assert (labels["acked_loss"], labels["reader_reaches_end"]) == (loss, end)


def test_duplicates_are_promised_absent_only_with_deduplication() -> None:
    assert expected(_setup("kill-broker@18000", dedup=True), False)["duplicates"] is False
    assert expected(_setup("kill-broker@18000", dedup=False), False)["duplicates"] is None


def test_the_rule_gives_the_labels_item_1_was_kept_with() -> None:
    rows = [
        json.loads(line)
        for line in (REPO_ROOT / "data" / "real-runs" / "manifest.jsonl").read_text().splitlines()
        if '"issue-27-item-1"' in line
    ]
    assert len(rows) == 7
    for row in rows:
        labels = expected(_setup(f"{row['scenario']}@1", row["config"]), row["skip_lost_data"])
        assert labels["acked_loss"] == row["expected"]["acked_loss"], row["run_id"]
        assert labels["reader_reaches_end"] == row["expected"]["reader_reaches_end"], row["run_id"]


def test_cluster_settings_are_recorded_only_when_given() -> None:
    given = argparse.Namespace(session_expired=None, autorecovery=False, skip_lost_data=False)
    assert cluster_settings(given) == {}
    given = argparse.Namespace(session_expired="reconnect", autorecovery=True, skip_lost_data=True)
    assert cluster_settings(given) == {
        "autorecovery": True,
        "skip_lost_data": True,
        "session_expired": "reconnect",
    }


def test_keep_all_replaces_a_run_by_its_id_and_sorts(tmp_path: Path) -> None:
    found = {"received": 1, "lost": 0, "duplicated": 0}
    old = {"run_id": "b", "found": found, "series": "old"}
    (tmp_path / "manifest.jsonl").write_text(json.dumps(old) + "\n")
    keep_all([{**old, "series": "new"}, {"run_id": "a", "found": found}], tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "manifest.jsonl").read_text().splitlines()]
    assert [(r["run_id"], r.get("series")) for r in rows] == [("a", None), ("b", "new")]
