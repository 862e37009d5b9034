"""Compare `analyze --json` with a simulated run's truth.json: every count, block and outage."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pulsar_audit.kinds import RUN_COUNTS

RUN_FIELDS = ("subscription", *RUN_COUNTS, "valid")
BLOCK_FIELDS = ("subscription", "partition", "producer", "kind", "seq_from", "seq_to", "count")


def _micros(value: Any) -> int:
    if isinstance(value, datetime):
        return round(value.timestamp() * 1_000_000)
    return round(datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() * 1_000_000)


def _verdict(value: Any) -> Any:
    """`valid` as analyze --json gives it (true / false / "unknown") or as truth.json writes
    it ("true" / "false" / "unknown"): compared as text; other fields pass through."""
    return {True: "true", False: "false"}.get(value, value) if isinstance(value, bool) else value


def _block(anomaly: dict[str, Any]) -> tuple:
    return tuple(anomaly[f] for f in BLOCK_FIELDS)


def _outage(outage: dict[str, Any]) -> tuple:
    start, end = _micros(outage["start"]), _micros(outage["end"])
    return outage["partition"], outage["producer"], start, end, outage["backoff_step"]


def disagreements(report: dict[str, Any], truth: dict[str, Any]) -> list[str]:
    """Every difference between the product's report and the truth, as readable lines."""
    run_id = truth["run_id"]
    found: list[str] = []
    got_runs = {r["subscription"]: r for r in report["runs"] if r["run_id"] == run_id}
    want_runs = {r["subscription"]: r for r in truth["runs"]}
    for sub in sorted(set(got_runs) | set(want_runs)):
        got, want = got_runs.get(sub), want_runs.get(sub)
        if got is None or want is None:
            found.append(
                f"{run_id} {sub}: subscription only in {'truth' if got is None else 'report'}"
            )
            continue
        for field in RUN_FIELDS:
            if _verdict(got[field]) != _verdict(want[field]):
                found.append(f"{run_id} {sub}: {field} analyze={got[field]} truth={want[field]}")
    got_blocks = {_block(a) for a in report["anomalies"] if a["run_id"] == run_id}
    want_blocks = {_block(a) for a in truth["anomalies"]}
    for block in sorted(got_blocks - want_blocks, key=str):
        found.append(
            f"{run_id}: block only in analyze {dict(zip(BLOCK_FIELDS, block, strict=True))}"
        )
    for block in sorted(want_blocks - got_blocks, key=str):
        found.append(f"{run_id}: block only in truth {dict(zip(BLOCK_FIELDS, block, strict=True))}")
    got_outages = sorted(_outage(o) for o in report["outages"] if o["run_id"] == run_id)
    want_outages = sorted(_outage(o) for o in truth["outages"])
    if got_outages != want_outages:
        found.append(f"{run_id}: outages analyze={got_outages} truth={want_outages}")
    return found
