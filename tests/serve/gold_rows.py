"""Literal gold rows for the alert tests: defaults for every column, overridden per test."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pulsar_audit.kinds import SUBSCRIPTION_TYPE_KINDS
from pulsar_audit.schemas import ANOMALIES, CONFIG_RISK, OUTAGES, RUN_EVENTS, RUN_SUMMARY

T0 = datetime(2026, 11, 22, 10, 0, 0)
TOPIC = "persistent://public/default/orders"


def summary(**over: Any) -> dict[str, Any]:
    row = {
        "run_id": "r1", "topic": TOPIC, "subscription": "s1", "sent": 10, "acked": 10,
        "nacked": 0, "received": 10, "lost": 0, "unseen": 0, "unacked_received": 0,
        "duplicated": 0, "redelivered": 0, "out_of_order": 0, "poll_skip": 0,
        "nonmonotonic_send": 0, **dict.fromkeys(SUBSCRIPTION_TYPE_KINDS, 0), "outages": 0,
        "unattributed": 0, "valid": "true", "reasons": [],
    }  # fmt: skip
    return {**row, **over}


def anomaly(**over: Any) -> dict[str, Any]:
    row = {
        "anomaly_id": "a-lost-1", "run_id": "r1", "topic": TOPIC, "subscription": "s1",
        "partition": -1, "producer": "p1", "kind": "lost", "seq_from": 5, "seq_to": 7,
        "count": 3, "first_ts": T0, "last_ts": T0,
        "explanation": "3 acked messages (seq 5–7) from producer p1 were never delivered",
        "causes": [],
    }  # fmt: skip
    return {**row, **over}


def outage(**over: Any) -> dict[str, Any]:
    row = {
        "outage_id": "o1", "run_id": "r1", "topic": TOPIC, "partition": -1, "producer": "p1",
        "start": T0, "end": T0, "duration_ms": 1500.0, "in_flight": 4, "backoff_step": 4,
        "explanation": "producer p1 had 4 message(s) in flight and none completed",
        "causes": [{"event_type": "bundle_unload_started", "ts": T0, "host": "b1",
                    "reason": "bundle unloaded 20 ms before"}],
    }  # fmt: skip
    return {**row, **over}


def risk(**over: Any) -> dict[str, Any]:
    row = {
        "cluster": "zk-0:2181", "namespace": "public/default",
        "policy_source": "namespace policy", "ensemble_size": 2, "write_quorum": 2,
        "ack_quorum": 1, "bookies_available": 3, "fault": "kill-bookies:1",
        "label": "autorecovery_impossible", "risk": 0.7, "baseline_risk": 0.9,
        "explanation": "Qa = 1: after 1 bookie of this ensemble is lost the ledger cannot be "
        "closed and re-replicated (probability of an unrecoverable ledger 0.70 given 1 bookie "
        "of the ensemble lost)",
        "drivers": ["Qa = 1"], "runs": 8, "failed_runs": 5,
        "model_name": "pulsar-audit-config-risk", "model_version": "3", "scored_at": T0,
    }  # fmt: skip
    return {**row, **over}


def config_event(run_id: str = "r1", deduplication: bool | None = False) -> dict[str, Any]:
    row = {f.name: None for f in RUN_EVENTS.fields}
    return {
        **row, "run_id": run_id, "topic": TOPIC, "client": "harness", "event": "config",
        "ts": T0, "deduplication": deduplication, "source_file": "f", "line_number": 1,
        "ingest_id": "i", "ingested_at": T0,
    }  # fmt: skip


def frames(spark, summaries=(), anomalies=(), outages=(), risks=(), run_events=()):  # noqa: ANN001, ANN201
    """The five inputs of `candidate_alerts` as DataFrames of their contract schemas."""
    return (
        spark.createDataFrame(list(summaries), RUN_SUMMARY),
        spark.createDataFrame(list(anomalies), ANOMALIES),
        spark.createDataFrame(list(outages), OUTAGES),
        spark.createDataFrame(list(risks), CONFIG_RISK),
        spark.createDataFrame(list(run_events), RUN_EVENTS),
    )


def write_gold(lakehouse, summaries=(), anomalies=(), outages=(), run_events=()) -> None:  # noqa: ANN001
    """Put literal rows into gold (and bronze.run_events), as the pipeline would have."""
    spark = lakehouse.spark
    for table, rows, schema, in (
        ("run_summary", summaries, RUN_SUMMARY),
        ("anomalies", anomalies, ANOMALIES),
        ("outages", outages, OUTAGES),
        ("run_events", run_events, RUN_EVENTS),
    ):  # fmt: skip
        if rows:
            lakehouse.merge(table, spark.createDataFrame(list(rows), schema))
