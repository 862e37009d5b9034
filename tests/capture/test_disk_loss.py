"""Disk loss without a cluster: the actions' parsing and validation, the wipe plan on a bookie's
real directory tree (its configuration rendered as the cluster renders it), and where
AutoRecovery's log goes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capture import disk_loss, launch, runlogs
from capture.chaos import ChaosSpec, check_possible
from capture.process import ProcessSpec
from capture.processes import ClusterState
from capture.scenarios import SCENARIOS, parse_scenario
from pulsar_audit.errors import SetupError, UsageError


def _cluster(tmp_path: Path, bookies: int = 3, kind: str = "cluster") -> ClusterState:
    return ClusterState(kind, str(tmp_path), "pulsar://x:1", "http://x:2", 1, bookies)


def _bookie(tmp_path: Path, name: str = "bookie-1", data_dir: Path | None = None) -> ProcessSpec:
    """A bookie whose configuration is rendered from conf/pulsar/bookie.conf, as multi.py does."""
    conf = launch.render(
        "bookie.conf", tmp_path / "conf" / f"{name}.conf", bookie_port=3181, zk_port=2181,
        data_dir=data_dir or tmp_path / "data" / name, host="127.0.0.1", zk_host="127.0.0.1",
        session_ms=10_000, interface="lo",
    )  # fmt: skip
    return ProcessSpec(name, "bookie", ["java", "--conf", str(conf)], "b.log", "b.out")


def _fill(directory: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_wipe_actions_parse_and_are_scenarios() -> None:
    assert ChaosSpec.parse("wipe-bookie-disk@300").label == "wipe-bookie-disk"
    assert ChaosSpec.parse("wipe-qw-bookies-disk@1").at_ack == 1
    with pytest.raises(UsageError, match="ACTION@ACK_COUNT"):
        ChaosSpec.parse("wipe-bookie-disk:2@5")  # no count: one bookie, or the write quorum
    assert parse_scenario("wipe-qw-bookies-disk") == ("wipe-qw-bookies-disk", 2)
    # E = Qw with no spare for the quorum wipe; a spare bookie beside E = 3 for the control
    assert SCENARIOS["wipe-qw-bookies-disk"][1:] == (3, "2-2-1")
    assert SCENARIOS["wipe-bookie-disk"][1:] == (4, "3-2-2")


def test_check_possible_refuses_wipes_that_cannot_run(tmp_path: Path) -> None:
    wipe_one, wipe_qw = (
        ChaosSpec.parse("wipe-bookie-disk@5"),
        ChaosSpec.parse("wipe-qw-bookies-disk@5"),
    )
    # a standalone's bookie lives in the broker's JVM: nothing to wipe alone
    with pytest.raises(UsageError, match="multi-process cluster"):
        check_possible(wipe_one, _cluster(tmp_path, 1, kind="standalone"), (1, 1, 1))
    with pytest.raises(
        UsageError, match="an ensemble of 4 needs as many bookies; the cluster has 3"
    ):
        check_possible(wipe_one, _cluster(tmp_path), (4, 2, 2))
    with pytest.raises(UsageError, match="would wipe every one of the cluster's 3 bookies"):
        check_possible(wipe_qw, _cluster(tmp_path), (3, 3, 2))
    check_possible(wipe_qw, _cluster(tmp_path), (2, 2, 1))  # the run that loses data
    check_possible(wipe_one, _cluster(tmp_path, 4), (3, 2, 2))  # the control


def test_wipe_plan_empties_the_bookies_directories_and_nothing_else(tmp_path: Path) -> None:
    bookie, other = _bookie(tmp_path), _bookie(tmp_path, "bookie-2")
    mine = tmp_path / "data" / "bookie-1"
    _fill(mine / "journal", {"current/VERSION": b"cookie", "current/1a.txn": b"x" * 1000})
    _fill(mine / "ledgers", {"current/VERSION": b"cookie", "current/0.log": b"y" * 500,
                             "current/ledgers/000003.sst": b"z" * 20})  # fmt: skip
    _fill(tmp_path / "data" / "bookie-2" / "journal", {"current/VERSION": b"cookie 2"})

    plan = disk_loss.plan_wipe(bookie, tmp_path / "data")
    assert plan.dirs == (mine / "journal", mine / "ledgers")
    assert disk_loss.wipe(plan) == {"dirs": 2, "files": 5, "bytes": 6 + 1000 + 6 + 500 + 20}
    # empty, as a new disk: no cookie left, so BookKeeper's cookie check sees the loss
    assert [list(d.iterdir()) for d in plan.dirs] == [[], []]
    assert (tmp_path / "data" / "bookie-2" / "journal" / "current" / "VERSION").read_bytes() == (
        b"cookie 2"
    )
    assert disk_loss.plan_wipe(other, tmp_path / "data").bookie == "bookie-2"


def test_wipe_plan_refuses_directories_outside_the_clusters_data(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    bookie = _bookie(tmp_path, data_dir=elsewhere)
    _fill(elsewhere / "journal", {"keep": b"1"})
    with pytest.raises(SetupError, match="expected its directories"):
        disk_loss.plan_wipe(bookie, tmp_path / "data")
    assert (elsewhere / "journal" / "keep").exists()
    with pytest.raises(SetupError, match="not started with --conf"):
        disk_loss.plan_wipe(ProcessSpec("zk", "zookeeper", ["java"], "z", "z"), tmp_path)


def test_autorecovery_log_is_copied_with_the_bookies(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _fill(logs, {"autorecovery.log": b"old\n", "bookie-1.log": b"old\n"})
    state = _cluster(tmp_path)
    state.processes = [
        ProcessSpec("autorecovery", "autorecovery", [], str(logs / "autorecovery.log"), "o"),
        ProcessSpec("bookie-1", "bookie", [], str(logs / "bookie-1.log"), "o"),
    ]
    assert state.autorecovery
    marks = runlogs.mark(state)
    with (logs / "autorecovery.log").open("a") as handle:
        handle.write("INFO  AuditorTask - Following ledgers: [7] of bookie: [b:1] are ...\n")
    rows = runlogs.copy_since(marks, tmp_path / "out", settle_s=0.0)
    copied = tmp_path / "out" / "bookie" / "autorecovery.log"
    assert copied.read_text().startswith("INFO  AuditorTask - Following ledgers: [7]")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (
        {r["file"] for r in rows}
        == {r["file"] for r in manifest}
        == {
            "bookie/autorecovery.log",
            "bookie/bookie-1.log",
        }
    )
