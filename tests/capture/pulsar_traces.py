"""Helpers of the capture tests: count and pick events of a captured trace folder."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from capture.processes import ClusterState


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
    """The run's `event` events in time order (a long run's trace spans several files)."""
    found = []
    for path in out.glob("*.jsonl"):
        with path.open() as handle:
            found += [json.loads(line) for line in handle if f'"event":"{event}"' in line]
    return sorted(found, key=lambda e: (e["ts"], e.get("client", ""), e.get("event_index", 0)))


def capture_opts(state: ClusterState, out: Path, **kwargs):  # noqa: ANN201
    from capture.harness import CaptureOptions

    return CaptureOptions(
        service_url=state.service_url, admin_url=state.admin_url, out=out, **kwargs
    )


def chaos_capture(
    state: ClusterState,
    out: Path,
    action: str,
    *,
    messages: int,
    config: tuple[int, int, int],
    dedup: bool = False,
    rate: float = 200.0,
    fault_at: float = 0.25,
    hold_s: float = 15.0,
    consumer: str = "reader",
) -> dict:
    """Capture `messages` paced at `rate` with `action` when `fault_at` of them are acked,
    read back by `consumer`; the capture summary (the faults are in the trace as `chaos` run
    events)."""
    from capture.chaos import ChaosSpec
    from capture.harness import capture

    spec = ChaosSpec.parse(f"{action}@{max(1, int(messages * fault_at))}", hold_s=hold_s)
    opts = capture_opts(
        state, out, topic=out.name, messages=messages, config=config, chaos=spec,
        scenario=spec.label, deduplication=dedup, rate=rate, consumer=consumer,
    )  # fmt: skip
    summary = capture(opts, state)
    assert "error" not in (summary["chaos"] or {}), summary["chaos"]
    return summary


def first_causes(findings: list[dict]) -> list[str | None]:
    """The event type of each finding's first (strongest) cause."""
    return [(f["causes"] or [{}])[0].get("event_type") for f in findings]
