"""What a watch of live_trace.py's chunks must have found, and what the receiver got."""

from __future__ import annotations

import json
from typing import Any

from live_trace import LATE, LOST

from serve.sinks import IDEMPOTENCY_HEADER

# (kind, seq_from, first_seen_batch, state, closed_batch): chunk 1 (batch 0) proves the outage
# in progress, chunk 2 (batch 1) ends it and proves both suspected losses; the run goes on.
AFTER_CHUNK_2 = [
    ("outage_in_progress", None, 0, "confirmed", 1),
    ("suspected_loss", LATE, 1, "open", None),
    ("suspected_loss", LOST, 1, "open", None),
]
# chunk 3 (batch 2): seq 5 arrives (withdrawn; its late delivery is out of order), the reader
# ends without seq 10 (lost): the run is reconciled.
AFTER_CHUNK_3 = [
    ("out_of_order", LATE, 2, "confirmed", 2),
    ("outage_in_progress", None, 0, "confirmed", 1),
    ("suspected_loss", LATE, 1, "withdrawn", 2),
    ("suspected_loss", LOST, 1, "confirmed", 2),
]


def findings(result: dict[str, Any]) -> list[tuple]:
    """(kind, seq_from, first_seen_batch, state, closed_batch) of each provisional finding."""
    return sorted(
        (r["kind"], r["seq_from"], r["first_seen_batch"], r["state"], r["closed_batch"])
        for r in result["provisional"]
    )


def received(httpserver) -> list[dict[str, Any]]:  # noqa: ANN001
    """The alerts the receiver accepted, with the Idempotency-Key each came with."""
    return [
        {"key": request.headers[IDEMPOTENCY_HEADER], **json.loads(request.get_data())}
        for request, response in httpserver.log
        if response.status_code == 200
    ]


def assert_each_finding_alerted_once(httpserver, result: dict[str, Any]) -> None:  # noqa: ANN001
    alerts = received(httpserver)
    assert len({a["key"] for a in alerts}) == len(alerts), "an alert was sent twice"
    ids = {r["finding_id"] for r in result["provisional"]}
    assert {a["finding_id"] for a in alerts if a["finding_id"] in ids} == ids
