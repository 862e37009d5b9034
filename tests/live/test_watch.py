"""`watch` end to end on real Spark Structured Streaming, real Delta and a real HTTP receiver:
a literal trace lands in three chunks (live_trace.py); each provisional finding appears in the
micro-batch of the chunk that proves it, and is confirmed or withdrawn once the run ends; a
second watch on the same checkpoint goes on after the files already handed out, and no alert
reaches the receiver twice. Opt-in (`-m live_long` or PULSAR_AUDIT_LONG_TESTS=1): each micro-batch
still costs minutes (docs/live.md, "What a micro-batch costs"); the default suite keeps the
literal tests of the live judgement (tests/pipelines/test_live.py, test_live_state.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from json_schema_check import validate
from live_trace import LATE, LOST, OUTAGE_END_MS, OUTAGE_START_MS, RUN, write_chunk
from watch_results import (
    AFTER_CHUNK_2,
    AFTER_CHUNK_3,
    assert_each_finding_alerted_once,
    findings,
    received,
)

from jobs.live import WatchOptions, watch
from pulsar_audit.config import AlertsConfig, SinkConfig, WebhookSinkConfig

pytestmark = pytest.mark.live_long


def _with_webhook(config, url: str):  # noqa: ANN001, ANN202
    hook = WebhookSinkConfig(url=url, max_attempts=2, backoff_initial_ms=20, timeout_ms=2000)
    return dataclasses.replace(
        config, alerts=AlertsConfig(sinks=[SinkConfig("hook", webhook=hook)])
    )


def test_provisional_findings_per_chunk_then_reconciled_and_alerted_once_across_a_restart(
    lakehouse, config, httpserver, tmp_path: Path
) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    config = _with_webhook(config, httpserver.url_for("/hook"))
    landing, checkpoint = tmp_path / "landing", str(tmp_path / "checkpoint")
    write_chunk(landing, 1)
    write_chunk(landing, 2)
    options = WatchOptions(checkpoint=checkpoint, once=True, max_files=1)

    first = watch(lakehouse, config, landing, options)

    assert (first["batches"], first["files"], first["runs"]) == (2, 2, [RUN])
    assert findings(first) == AFTER_CHUNK_2
    [outage] = [r for r in first["provisional"] if r["kind"] == "outage_in_progress"]
    assert outage["duration_ms"] == OUTAGE_END_MS - OUTAGE_START_MS
    assert outage["resolved_by"] is not None
    provisional_sent = [
        a for a in received(httpserver) if a["kind"] in ("suspected_loss", "outage_in_progress")
    ]
    assert sorted(a["kind"] for a in provisional_sent) == [
        "outage_in_progress",
        "suspected_loss",
        "suspected_loss",
    ]

    # chunk 3 lands; a second watch on the same checkpoint takes only it
    write_chunk(landing, 3)
    second = watch(lakehouse, config, landing, options)

    assert (second["batches"], second["files"]) == (1, 1)
    assert findings(second) == AFTER_CHUNK_3
    validate(json.loads(json.dumps(second, default=str)), "watch")  # as --json prints it
    by_seq = {r["seq_from"]: r for r in second["provisional"] if r["kind"] == "suspected_loss"}
    assert by_seq[LATE]["resolved_by"] is None
    lost = lakehouse.read("anomalies").filter("kind = 'lost'").collect()
    assert [(a.seq_from, a.anomaly_id) for a in lost] == [(LOST, by_seq[LOST]["resolved_by"])]

    assert_each_finding_alerted_once(httpserver, second)
