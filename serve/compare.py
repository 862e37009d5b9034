"""`compare RUN_A RUN_B`: two runs side by side: their counts, their outages, the causes
correlation gave their findings. Read from gold's small tables (one row per subscription,
outage or finding block)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pyspark.sql import functions as F

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.kinds import ANOMALY_KINDS
from serve.snapshot import check_run_exists
from serve.summary import json_verdict

# Counted once per topic (every subscription of a topic repeats them); the rest per subscription.
TOPIC_COUNTS = ("sent", "acked", "nacked")
SUBSCRIPTION_COUNTS = ("received", *ANOMALY_KINDS)
# A run's verdict is its worst subscription's.
VERDICT_ORDER = ("false", "unknown", "true")
NO_CAUSE = "(no cause found)"


def _run_counts(lakehouse: Lakehouse, run_id: str) -> dict[str, Any]:
    rows = [
        r.asDict()
        for r in lakehouse.read("run_summary").filter(F.col("run_id") == run_id).collect()
    ]
    per_topic = {r["topic"]: r for r in rows}
    counts: dict[str, Any] = {
        "topics": len(per_topic),
        "subscriptions": len(rows),
        **{c: sum(r[c] or 0 for r in per_topic.values()) for c in TOPIC_COUNTS},
        **{c: sum(r[c] or 0 for r in rows) for c in SUBSCRIPTION_COUNTS},
    }
    verdicts = {r["valid"] for r in rows}
    counts["valid"] = json_verdict(next((v for v in VERDICT_ORDER if v in verdicts), "unknown"))
    return counts


def _outages(lakehouse: Lakehouse, run_id: str) -> dict[str, Any]:
    row = (
        lakehouse.read("outages")
        .filter(F.col("run_id") == run_id)
        .agg(
            F.count(F.lit(1)).alias("outages"),
            F.sum("duration_ms").alias("outage_ms_total"),
            F.max("duration_ms").alias("outage_ms_longest"),
        )
        .first()
    )
    found = row.asDict() if row is not None else {}
    return {k: found.get(k) or 0 for k in ("outages", "outage_ms_total", "outage_ms_longest")}


def _first_causes(lakehouse: Lakehouse, run_id: str) -> Counter:
    """How many findings (outages and anomaly blocks) have each event type as first cause."""
    first = F.coalesce(F.get("causes", 0)["event_type"], F.lit(NO_CAUSE)).alias("cause")
    parts = [
        lakehouse.read(table).filter(F.col("run_id") == run_id).select(first)
        for table in ("outages", "anomalies")
    ]
    counted = parts[0].unionByName(parts[1]).groupBy("cause").count().collect()
    return Counter({r["cause"]: r["count"] for r in counted})


def _side_by_side(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "a": a.get(name), "b": b.get(name)} for name in dict.fromkeys([*a, *b])]


def compare_runs(lakehouse: Lakehouse, run_a: str, run_b: str) -> dict[str, Any]:
    """The `compare --json` object: {"run_a", "run_b", "counts", "outages", "causes"}, each a
    list of {"name", "a", "b"} rows (causes: the event type correlation ranked first, per
    finding; counts: summed over the run's topics and subscriptions, `valid` the worst)."""
    for run_id in (run_a, run_b):
        check_run_exists(lakehouse, run_id)
    causes_a, causes_b = _first_causes(lakehouse, run_a), _first_causes(lakehouse, run_b)
    causes = sorted(set(causes_a) | set(causes_b), key=lambda c: (-(causes_a[c] + causes_b[c]), c))
    return {
        "run_a": run_a,
        "run_b": run_b,
        "counts": _side_by_side(_run_counts(lakehouse, run_a), _run_counts(lakehouse, run_b)),
        "outages": _side_by_side(_outages(lakehouse, run_a), _outages(lakehouse, run_b)),
        "causes": [{"name": c, "a": causes_a[c], "b": causes_b[c]} for c in causes],
    }
