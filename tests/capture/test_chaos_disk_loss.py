"""Disk loss on a real local cluster with AutoRecovery running, checked end to end by `analyze`
(issue 27 item 1): the write quorum's disks wiped where the posts say acked messages can be
lost (E = Qw = 2, Qa = 1), and one disk wiped where they cannot (E = 3, Qw = Qa = 2, a spare
bookie for AutoRecovery to copy to); and (item 3, apache/pulsar#21987) the write quorum's two
disks lost one after the other, AutoRecovery copying between them.

Opt-in (minutes each, one cluster per test): PULSAR_AUDIT_CHAOS=1 or -m chaos.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pulsar_traces import chaos_capture, trace_events

from capture import cluster, process

pytestmark = [pytest.mark.pulsar, pytest.mark.slow, pytest.mark.chaos]

MESSAGES, RATE, FAULT_AT = 3000, 200.0, 0.3


def _wipe_run(  # noqa: PLR0913
    tmp_path: Path,
    lakehouse,
    config,
    action,
    bookies,
    quorum,
    skip=False,
    messages=MESSAGES,  # noqa: ANN001
    hold_s=15.0,
) -> tuple:
    """Start 1 broker, `bookies` bookies and AutoRecovery (the brokers skipping lost entries
    if `skip`); capture with `action` at 30 % of the acks; analyze. Returns (the chaos
    events, the run's row, its anomalies, the copied AutoRecovery log)."""
    from jobs.analyze import analyze

    workdir = tmp_path / "cluster"
    try:
        state = cluster.up(
            workdir, brokers=1, bookies=bookies, autorecovery=True, skip_lost_data=skip
        )
        out = tmp_path / action
        summary = chaos_capture(
            state, out, action, messages=messages, config=quorum, rate=RATE, fault_at=FAULT_AT,
            hold_s=hold_s,
        )  # fmt: skip
        faults = trace_events(out, "chaos")  # start, end; or per bookie in turn
        start, end = faults[0], faults[-1]
        starts = [fault["target"] for fault in faults if fault.get("phase") != "end"]
        victims = [state.get(name) for target in starts for name in target.split(",")]
        # restarted empty under the same identity: the cookie check let them start
        assert all(process.is_alive(victim.pid) for victim in victims), starts
    finally:
        cluster.down(workdir)
    print(f"\n{action} {quorum}: capture {summary}")  # noqa: T201
    result = analyze(lakehouse, config, out)
    print(f"runs {result['runs']}\nanomalies {result['anomalies']}")  # noqa: T201
    [run] = [row for row in result["runs"] if row["subscription"] == summary["consume"]["name"]]
    recovery_log = (out / "logs" / "bookie" / "autorecovery.log").read_text()
    return (start, end), run, result["anomalies"], recovery_log


def test_wiping_the_write_quorum_at_qa_1_loses_acked_messages(lakehouse, config, tmp_path) -> None:
    (start, end), run, anomalies, recovery_log = _wipe_run(
        tmp_path, lakehouse, config, "wipe-qw-bookies-disk", bookies=3, quorum=(2, 2, 1)
    )
    assert start["count"] == 2 and end["phase"] == "end" and end["files_wiped"] > 0, end
    assert end["cookie"].startswith("deleted"), end
    # both copies of the ledger written before the fault are gone: the read after the restart
    # cannot have every acknowledged message, and no verdict may call the run valid
    assert run["received"] < run["acked"], run
    assert run["valid"] is not True, run
    # AutoRecovery saw both bookies go and marked their ledgers under-replicated
    assert "and searching its ledgers for re-replication" in recovery_log
    assert "are identified as underreplicated" in recovery_log


def test_wiping_the_write_quorum_with_lost_entries_skipped_shows_them_lost(
    lakehouse, config, tmp_path
) -> None:
    """The same fault, the brokers set to skip entries no bookie has any more (as an operator
    does to unblock consumers after a loss): the reader reaches the end without them."""
    (start, end), run, anomalies, _ = _wipe_run(
        tmp_path, lakehouse, config, "wipe-qw-bookies-disk", 3, (2, 2, 1), skip=True
    )
    assert start["count"] == 2 and end["files_wiped"] > 0, end
    assert run["valid"] is False and run["lost"] > 0, run
    assert run["received"] + run["lost"] >= run["acked"], run
    assert any(a["kind"] == "lost" for a in anomalies), anomalies


def test_one_disk_lost_at_qw_qa_2_with_autorecovery_loses_nothing(
    lakehouse, config, tmp_path
) -> None:
    # 6000 messages (30 s of sends): the run lasts past the auditor's marking, so that the
    # replication worker's repair (or its failure) is in the copied log
    (start, end), run, anomalies, recovery_log = _wipe_run(
        tmp_path, lakehouse, config, "wipe-bookie-disk", 4, (3, 2, 2), messages=6000
    )
    assert start["target"].startswith("bookie-") and end["files_wiped"] > 0, end
    # every entry had a second copy: nothing acknowledged may be missing
    assert (run["lost"], run["unseen"], run["valid"]) == (0, 0, True), run
    assert run["received"] >= run["acked"]
    assert "are identified as underreplicated" in recovery_log


def test_two_disks_lost_in_turn_with_autorecovery_between_them_lose_nothing(
    lakehouse, config, tmp_path
) -> None:
    """E = Qw = Qa = 2 on 3 bookies: the first disk's copies re-replicated to the third bookie
    in the 90 s before the second disk goes, as BookKeeper 4.16.3 and later do (this release's
    4.17.2; 4.16.1, Pulsar 3.0.0's, stopped after its first ledger: apache/pulsar#21987)."""
    (start, end), run, anomalies, recovery_log = _wipe_run(
        tmp_path, lakehouse, config, "wipe-qw-bookies-disk-in-turn", 3, (2, 2, 2), skip=True,
        hold_s=90.0,
    )  # fmt: skip
    assert (start["turn"], end["turn"], end["files_wiped"] > 0) == (1, 2, True), (start, end)
    assert end["reloaded"], end  # the topic reloaded: its ledger read with AutoRecovery's copy
    assert "Ledger replicated successfully" in recovery_log
    # the first wipe's copies were on the third bookie when the second went: nothing lost
    assert (run["lost"], run["unseen"], run["valid"]) == (0, 0, True), run
