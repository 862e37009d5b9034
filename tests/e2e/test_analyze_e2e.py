"""End to end: `pulsar-audit analyze --json` on hand-written runs with known injected anomalies.

The real CLI, in process (tests/in_process_cli.py: the tests' Spark session, no JVM start per
command); the same command as a child process is run by the reliability suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from in_process_cli import cli_in_process
from literal_runs import T0_MS, RunSpec, write_run

from pulsar_audit.kinds import SUBSCRIPTION_TYPE_KINDS

TOPIC = "persistent://public/default/orders"
ZERO = {
    "lost": 0,
    "unseen": 0,
    "unacked_received": 0,
    "duplicated": 0,
    "redelivered": 0,
    "out_of_order": 0,
    "poll_skip": 0,
    "nonmonotonic_send": 0,
    **dict.fromkeys(SUBSCRIPTION_TYPE_KINDS, 0),
}
# These traces are version 1: no subscription type (docs/subscription-types.md).
UNTYPED = (
    "subscription type not in the trace: order judged per partition, as for Exclusive and "
    "Failover; key order and ownership not checked"
)


def _run(run_id: str, subscription: str, **counts) -> dict:
    return {
        "run_id": run_id,
        "topic": TOPIC,
        "subscription": subscription,
        "subscription_type": None,
        **counts,
        "unchecked": [UNTYPED],
    }


def _expected_runs() -> list[dict]:
    clean = {"sent": 200, "acked": 200, "nacked": 0, "received": 200, **ZERO, "valid": True}
    return [
        _run("run-clean", "reader-1", **clean),
        _run("run-clean", "reader-2", **clean),
        _run(
            "run-dedup",
            "reader-1",
            sent=50,
            acked=50,
            nacked=0,
            received=50,
            **{**ZERO, "duplicated": 2},
            valid=False,
        ),
        _run(
            "run-faults",
            "reader-1",
            sent=300,
            acked=298,
            nacked=2,
            received=296,
            lost=3,
            unseen=0,
            unacked_received=1,
            duplicated=5,
            redelivered=2,
            out_of_order=1,
            poll_skip=4,  # the reader jumped over 50–52 (lost) and over 200 (got it later)
            nonmonotonic_send=0,
            **dict.fromkeys(SUBSCRIPTION_TYPE_KINDS, 0),
            valid=False,
        ),
        # The ack without a send counts as acked and lost, but the failed check makes the
        # verdict unknown rather than false. Having no send, it has no place in the
        # producer's send order: no non-monotonic send.
        _run(
            "run-orphan",
            "reader-1",
            sent=20,
            acked=21,
            nacked=0,
            received=20,
            **{**ZERO, "lost": 1},
            valid="unknown",
        ),
        _run(
            "run-unseen",
            "reader-1",
            sent=100,
            acked=100,
            nacked=0,
            received=99,
            **{**ZERO, "unseen": 1, "poll_skip": 1},  # got 9 then 11: a jump over 10
            valid=False,
        ),
    ]


def _write_folder(folder: Path) -> None:
    write_run(
        folder, RunSpec("run-clean", messages=200, readers=("reader-1", "reader-2"), gzip=True)
    )
    write_run(
        folder,
        RunSpec(
            "run-faults",
            messages=300,
            lost={50, 51, 52},
            duplicated={100, 101, 102, 103, 104},
            redelivered={150, 151},
            swapped={200},
            nacked={250},
            nacked_delivered={260},
            outages={70: 350},
        ),
    )
    write_run(folder, RunSpec("run-unseen", messages=100, lost={10}, end=False))
    write_run(folder, RunSpec("run-dedup", messages=50, duplicated={5, 6}, deduplication=True))
    write_run(folder, RunSpec("run-orphan", messages=20))
    orphan = {
        "run_id": "run-orphan",
        "topic": TOPIC,
        "role": "producer",
        "client": "p1",
        "event": "ack",
        "seq": 999,
        "ts": T0_MS + 5,
        "ledger_id": 10,
        "entry_id": 999,
    }
    (folder / "run-orphan-extra.jsonl").write_text(json.dumps(orphan) + "\n")


def _analyze(spark, folder: Path, lakehouse: Path, *extra: str) -> tuple[int, str, str]:  # noqa: ANN001
    """`pulsar-audit analyze FOLDER --json` (exit code, stdout, stderr)."""
    argv = ("analyze", str(folder), "--lakehouse", str(lakehouse), "--json", *extra)
    return cli_in_process(spark, *argv)


@pytest.mark.slow
def test_analyze_reports_every_injected_anomaly_twice_identically(spark, tmp_path: Path):
    folder = tmp_path / "traces"
    _write_folder(folder)
    code, out, err = _analyze(spark, folder, tmp_path / "lakehouse", "--fail-on-anomaly")
    assert code == 1, err[-3000:]
    result = json.loads(out)
    assert result["ingest"] == {"files": 17, "records": 2225, "accepted": 2225, "quarantined": 0}
    assert result["runs"] == _expected_runs()
    assert [len(o.pop("outage_id")) for o in result["outages"]] == [64]
    assert result["outages"] == [
        {
            "run_id": "run-faults",
            "topic": TOPIC,
            "partition": -1,
            "producer": "p1",
            "start": "2025-03-04T10:00:00.700000",
            "end": "2025-03-04T10:00:01.050000",
            "duration_ms": 350.0,
            "backoff_step": 2,
            "causes": [],
        }
    ]

    code, out, err = _analyze(spark, folder, tmp_path / "lakehouse")
    assert code == 0, err[-3000:]
    again = json.loads(out)
    for outage in again["outages"]:
        outage.pop("outage_id")
    assert again["ingest"] == {"files": 0, "records": 0, "accepted": 0, "quarantined": 0}
    assert (again["runs"], again["outages"]) == (result["runs"], result["outages"])
    assert again["anomalies"] == result["anomalies"]
    assert sorted(
        (a["run_id"], a["kind"], a["seq_from"], a["seq_to"]) for a in again["anomalies"]
    ) == [
        ("run-dedup", "duplicated", 5, 6),
        ("run-faults", "duplicated", 100, 104),
        ("run-faults", "lost", 50, 52),
        ("run-faults", "out_of_order", 200, 200),
        ("run-faults", "poll_skip", 50, 52),
        ("run-faults", "poll_skip", 200, 200),
        ("run-faults", "redelivered", 150, 151),
        ("run-faults", "unacked_received", 260, 260),
        ("run-orphan", "lost", 999, 999),
        ("run-unseen", "poll_skip", 10, 10),
        ("run-unseen", "unseen", 10, 10),
    ]
