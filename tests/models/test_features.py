"""gold.run_features from tiny literal bronze, silver and gold rows (real Spark)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import DataFrame

from models.features import build_run_features
from pulsar_audit.kinds import SUBSCRIPTION_TYPE_KINDS
from pulsar_audit.schemas import (
    ANOMALIES,
    INFRA_EVENTS,
    MESSAGE_HISTORY,
    OUTAGES,
    RUN_EVENTS,
    RUN_FEATURES,
    RUN_FILES,
    RUN_SUMMARY,
)

T0 = datetime(2025, 3, 4, 10, 0, 0)
SCHEMAS = {
    "run_events": RUN_EVENTS,
    "run_files": RUN_FILES,
    "message_history": MESSAGE_HISTORY,
    "run_summary": RUN_SUMMARY,
    "anomalies": ANOMALIES,
    "outages": OUTAGES,
    "infra_events": INFRA_EVENTS,
}


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def _row(schema, **values: Any) -> dict[str, Any]:  # noqa: ANN001
    return {**{f.name: None for f in schema.fields}, **values}


def config(run: str, e: int, qw: int, qa: int, simulated: bool) -> dict[str, Any]:
    extra = {"simulated": "true"} if simulated else {}
    return _row(
        RUN_EVENTS, run_id=run, topic="t", client="h", event="config", ts=at(0),
        ensemble_size=e, write_quorum=qw, ack_quorum=qa, brokers=3, bookies=5,
        deduplication=False, scenario="kill-bookie", extra=extra, source_file=f"/{run}/t.jsonl",
        line_number=1, ingest_id="i", ingested_at=T0,
    )  # fmt: skip


def chaos(run: str, ms: float, action: str, target: str, phase: str | None = None) -> dict:
    extra = {"phase": f'"{phase}"'} if phase else {}
    return _row(
        RUN_EVENTS, run_id=run, topic="t", client="h", event="chaos", ts=at(ms), action=action,
        target=target, extra=extra, source_file=f"/{run}/t.jsonl", line_number=2 + int(ms),
        ingest_id="i", ingested_at=T0,
    )  # fmt: skip


def message(run: str, seq: int, sent: float, acked: float) -> dict[str, Any]:
    return _row(
        MESSAGE_HISTORY, run_id=run, topic="t", partition=-1, producer="p1", seq=seq, sent=True,
        send_ts=at(sent), acked=True, ack_ts=at(acked),
        ack_id={"ledger_id": 10, "entry_id": seq, "batch_index": -1}, nacked=False, copies=[],
        subscriptions=[],
    )  # fmt: skip


def summary(run: str, unseen: int = 0, duplicated: int = 0) -> dict[str, Any]:
    counts = dict.fromkeys(
        ["sent", "acked", "nacked", "received", "lost", "unseen", "unacked_received",
         "duplicated", "redelivered", "out_of_order", "poll_skip", "nonmonotonic_send",
         *SUBSCRIPTION_TYPE_KINDS, "outages", "unattributed"], 0)  # fmt: skip
    counts.update(unseen=unseen, duplicated=duplicated)
    return _row(
        RUN_SUMMARY, run_id=run, topic="t", subscription="reader-1", valid="unknown",
        reasons=[], **counts,
    )  # fmt: skip


def infra(event_type: str, ms: float, file: str, ledger: int | None = None) -> dict[str, Any]:
    return _row(
        INFRA_EVENTS, event_id=f"{event_type}{ms}", ts=at(ms), corrected_ts=at(ms),
        clock="uncorrected", host="zk", source="zookeeper", event_type=event_type,
        ledger_id=ledger, source_file=file, line_number=1,
    )  # fmt: skip


def frames(spark, **rows: list[dict[str, Any]]) -> list[DataFrame]:  # noqa: ANN001
    return [spark.createDataFrame(rows.get(name, []), schema) for name, schema in SCHEMAS.items()]


def test_no_runs_no_rows(spark) -> None:
    built = build_run_features(*frames(spark))
    assert [(f.name, f.dataType) for f in built.schema] == [
        (f.name, f.dataType) for f in RUN_FEATURES
    ]
    assert built.count() == 0


def test_a_simulated_bookie_loss_and_a_real_restart(spark) -> None:
    rows = frames(
        spark,
        run_events=[
            config("r1", 2, 2, 1, simulated=True),
            chaos("r1", 1.5, "kill-bookie", "bookie-0"),
            config("r2", 3, 2, 2, simulated=False),
            chaos("r2", 1.0, "kill-bookies:2", "b1, b2", "start"),
            chaos("r2", 9000.0, "kill-bookies:2", "b1, b2", "end"),
            config("r3", 2, 2, 1, simulated=False),
            chaos("r3", 1.0, "kill-bookie", "b1"),
        ],
        run_files=[
            _row(
                RUN_FILES,
                run_id=r,
                table="producer_events",
                source_file=f"/data/{r}/t.jsonl",
                rows=6,
                ingest_id="i",
                ingested_at=T0,
            )
            for r in ("r1", "r2", "r3")
        ],  # fmt: skip
        message_history=[
            *[message("r1", seq, seq, 10 + seq) for seq in range(3)],
            message("r2", 0, 0, 1),
            message("r2", 1, 2, 3),
            message("r3", 0, 0, 1),
        ],
        run_summary=[summary("r1", unseen=2), summary("r2"), summary("r3")],
        anomalies=[
            _row(
                ANOMALIES,
                anomaly_id="a",
                run_id="r1",
                topic="t",
                subscription="reader-1",
                partition=-1,
                producer="p1",
                kind="unseen",
                seq_from=1,
                seq_to=2,
                count=2,
                explanation="x",
                causes=[],
            )
        ],  # fmt: skip
        outages=[
            _row(
                OUTAGES,
                outage_id="o",
                run_id="r1",
                topic="t",
                partition=-1,
                producer="p1",
                start=at(0),
                end=at(1500),
                duration_ms=1500.0,
                in_flight=3,
                backoff_step=4,
                explanation="x",
                causes=[],
            )
        ],  # fmt: skip
        infra_events=[
            infra("bookie_lost", 30_000, "/data/r1/cluster.zk.jsonl"),
            infra("ledger_under_replicated", 31_000, "/data/r1/logs/bookie/auditor.log", 10),
            # another run's folder whose name starts the same: not r1's
            infra("ledger_re_replicated", 39_000, "/data/r10/cluster.zk.jsonl", 10),
            # r3's cluster lost a bookie but runs no auditor (as the local cluster)
            infra("bookie_lost", 11_000, "/data/r3/cluster.zk.jsonl"),
        ],
    )
    got = {r["run_id"]: r.asDict() for r in build_run_features(*rows).collect()}

    r1 = got["r1"]
    assert (r1["source"], r1["striping"], r1["fault_kind"]) == ("simulated", False, "kill-bookie")
    assert (r1["fault_bookies"], r1["bookies_left"], r1["brokers_left"]) == (1, 4, 3)
    assert (r1["in_flight_max"], r1["partitions"], r1["batching"]) == (3, 0, False)
    assert r1["data_survived"] is False  # killed, never registered again
    assert r1["fault_duration_s"] == pytest.approx(0.0105)  # no end: to the last ack (12 ms)
    labels = {k: r1[k] for k in ("acked_loss", "unreadable", "duplicates", "outage_1s",
                                 "autorecovery_impossible")}  # fmt: skip
    assert labels == {
        "acked_loss": None,  # its one reader stopped short (unseen): loss cannot be told
        "unreadable": True,  # a reader fell short while the run lost a bookie
        "duplicates": None,
        "outage_1s": True,
        "autorecovery_impossible": True,  # under-replicated, never re-replicated
    }

    r2 = got["r2"]
    assert (r2["source"], r2["striping"], r2["fault_kind"]) == ("real", True, "kill-bookie")
    assert (r2["fault_bookies"], r2["bookies_left"]) == (2, 3)
    assert r2["data_survived"] is True  # the fault's end: the bookies restarted
    assert r2["fault_duration_s"] == pytest.approx(8.999)
    assert r2["in_flight_max"] == 1
    assert r2["unreadable"] is False
    assert r2["autorecovery_impossible"] is None  # bookies lost, no infrastructure data
    # a bookie lost, no AutoRecovery record at all: cannot tell (not "repaired")
    assert got["r3"]["autorecovery_impossible"] is None
    assert got["r3"]["data_survived"] is False


def test_a_wiped_bookie_disk_is_a_bookie_fault_whose_copies_did_not_survive(spark) -> None:
    """wipe-qw-bookies-disk (issue 27): the bookies are killed and restarted empty — the
    fault's end says restarted and the bookies register again, yet no copy came back."""
    rows = frames(
        spark,
        run_events=[
            config("w1", 2, 2, 1, simulated=False),
            chaos("w1", 1.0, "wipe-qw-bookies-disk", "bookie-0,bookie-1", "start"),
            chaos("w1", 12_000.0, "wipe-qw-bookies-disk", "bookie-0,bookie-1", "end"),
            config("k1", 2, 2, 1, simulated=False),
            chaos("k1", 1.0, "kill-qw-bookies", "bookie-0,bookie-1", "start"),
            chaos("k1", 12_000.0, "kill-qw-bookies", "bookie-0,bookie-1", "end"),
        ],
        message_history=[message("w1", 0, 0, 1), message("k1", 0, 0, 1)],
        run_summary=[summary("w1"), summary("k1")],
        infra_events=[infra("bookie_registered", 13_000, "/data/w1/cluster.zk.jsonl")],
    )
    got = {r["run_id"]: r.asDict() for r in build_run_features(*rows).collect()}
    wiped, killed = got["w1"], got["k1"]
    assert (wiped["fault_kind"], wiped["fault_bookies"], wiped["bookies_left"]) == (
        "kill-bookie",
        2,
        3,
    )
    assert wiped["data_survived"] is False  # back, registered, but empty
    assert killed["data_survived"] is True  # the same quorum restarted with its disks


def test_an_unload_then_a_wipe_in_one_run_is_one_bookie_fault_from_the_first_to_the_last(
    spark,
) -> None:
    """Two chaos actions in one run (`chaos run --then`): the kind is the wipe's (the unload
    only moves the bundle), the fault spans the unload's start to the wipe's end."""
    rows = frames(
        spark,
        run_events=[
            config("two", 3, 2, 2, simulated=False),
            chaos("two", 1.0, "unload", "public/default/0x0_0x1", "start"),
            chaos("two", 5_000.0, "wipe-qw-bookies-disk", "bookie-1,bookie-2", "start"),
            chaos("two", 17_000.0, "wipe-qw-bookies-disk", "bookie-1,bookie-2", "end"),
            config("one", 1, 1, 1, simulated=False),
            chaos("one", 1.0, "unload", "public/default/0x0_0x1", "start"),
        ],
        message_history=[message("two", 0, 0, 1), message("one", 0, 0, 20_000)],
        run_summary=[summary("two"), summary("one")],
    )
    got = {r["run_id"]: r.asDict() for r in build_run_features(*rows).collect()}
    two, one = got["two"], got["one"]
    assert (two["fault_kind"], two["fault_bookies"], two["fault_brokers"]) == ("kill-bookie", 2, 0)
    assert two["data_survived"] is False  # the wipe's disks
    assert two["fault_duration_s"] == pytest.approx(16.999)
    assert (one["fault_kind"], one["fault_bookies"], one["data_survived"]) == ("unload", 0, True)
    assert one["fault_duration_s"] == pytest.approx(19.999)  # no end: to the last ack
