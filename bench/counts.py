"""What every checker reports, in one shape, and how two reports are compared.

A report is {"checker", "records", "runs": [...], "outages": [...]}:
- runs: one dict per (run_id, topic, subscription) with RUN_COUNTS, as `analyze --json` "runs";
- outages: one dict per (run_id, topic) with the number of outages (`analyze --json` lists
  each outage; topics without any are left out).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pulsar_audit.kinds import RUN_COUNTS as ALL_RUN_COUNTS
from pulsar_audit.kinds import SUBSCRIPTION_TYPE_KINDS

RUN_KEY = ("run_id", "topic", "subscription")
# The counts the reference checkers compute: all of a run's but poll skips, non-monotonic
# sends and the kinds of the subscription types (docs/subscription-types.md) other than
# shared_reordered (out_of_order's walk on a Shared subscription), which they do not restate.
NOT_RESTATED = (
    "poll_skip",
    "nonmonotonic_send",
    *(k for k in SUBSCRIPTION_TYPE_KINDS if k != "shared_reordered"),
)
RUN_COUNTS = tuple(c for c in ALL_RUN_COUNTS if c not in NOT_RESTATED)
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")  # .parquet: the columnar form
ZK_SUFFIXES = (".zk.jsonl", ".zk.jsonl.gz")


def trace_files(root: str | Path) -> list[Path]:
    """The trace files `pulsar-audit analyze` would read under `root`, sorted."""
    root = Path(root)
    if root.is_file():
        return [root.resolve()]

    def wanted(name: str) -> bool:
        return name.endswith(TRACE_SUFFIXES) and not name.endswith(ZK_SUFFIXES)

    return sorted(p.resolve() for p in root.rglob("*") if p.is_file() and wanted(p.name))


def report(
    checker: str, records: int, runs: list[dict[str, Any]], outages: dict[tuple, int]
) -> dict[str, Any]:
    """A report with runs sorted by key and every count an int; outages > 0 only."""
    rows = [
        {**{k: r[k] for k in RUN_KEY}, **{c: int(r.get(c) or 0) for c in RUN_COUNTS}} for r in runs
    ]
    rows.sort(key=lambda r: tuple(r[k] for k in RUN_KEY))
    outage_rows = [
        {"run_id": run_id, "topic": topic, "outages": int(n)}
        for (run_id, topic), n in sorted(outages.items())
        if n
    ]
    return {"checker": checker, "records": int(records), "runs": rows, "outages": outage_rows}


def from_analyze(result: dict[str, Any]) -> dict[str, Any]:
    """`pulsar-audit analyze --json` output in the report shape."""
    outages = Counter((o["run_id"], o["topic"]) for o in result.get("outages", []))
    ingest = result.get("ingest") or {}
    return report("analyze", ingest.get("records", 0), result["runs"], dict(outages))


def differences(left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """Every count on which two reports disagree, one line each (empty when they agree)."""
    a_name, b_name = left["checker"], right["checker"]
    out = []
    a_runs = {tuple(r[k] for k in RUN_KEY): r for r in left["runs"]}
    b_runs = {tuple(r[k] for k in RUN_KEY): r for r in right["runs"]}
    for key in sorted(a_runs.keys() | b_runs.keys()):
        a, b = a_runs.get(key), b_runs.get(key)
        if a is None or b is None:
            out.append(f"{'/'.join(key)}: only in {a_name if b is None else b_name}")
            continue
        for count in RUN_COUNTS:
            if a[count] != b[count]:
                out.append(f"{'/'.join(key)} {count}: {a_name}={a[count]} {b_name}={b[count]}")
    a_out = {(o["run_id"], o["topic"]): o["outages"] for o in left["outages"]}
    b_out = {(o["run_id"], o["topic"]): o["outages"] for o in right["outages"]}
    for key in sorted(a_out.keys() | b_out.keys()):
        a, b = a_out.get(key, 0), b_out.get(key, 0)
        if a != b:
            out.append(f"{'/'.join(key)} outages: {a_name}={a} {b_name}={b}")
    return out


def totals(rep: dict[str, Any]) -> dict[str, int]:
    """Each count summed over all (run, topic, subscription) rows, plus outages."""
    sums = {c: sum(r[c] for r in rep["runs"]) for c in RUN_COUNTS}
    sums["outages"] = sum(o["outages"] for o in rep["outages"])
    return sums
