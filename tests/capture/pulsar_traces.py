"""Helpers of the capture tests: count and pick events of a captured trace folder."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ingest.pulsar.cluster import ClusterState


def trace_counts(out: Path) -> Counter:
    """(role, event) → number of events in the trace folder `out`."""
    counts: Counter = Counter()
    for path in out.glob("*.jsonl"):
        with path.open() as handle:
            for line in handle:
                event = json.loads(line)
                counts[(event["role"], event["event"])] += 1
    return counts


def trace_events(out: Path, event: str) -> list[dict]:
    found = []
    for path in out.glob("*.jsonl"):
        with path.open() as handle:
            found += [json.loads(line) for line in handle if f'"event":"{event}"' in line]
    return found


def capture_opts(state: ClusterState, out: Path, **kwargs):  # noqa: ANN201
    from ingest.pulsar.harness import CaptureOptions

    return CaptureOptions(
        service_url=state.service_url, admin_url=state.admin_url, out=out, **kwargs
    )
