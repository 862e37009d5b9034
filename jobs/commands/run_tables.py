"""The text tables of runs and outages (`analyze`, `summary`, `runs list`): narrow enough for a
100-column terminal; `--wide` gives every count (and `--json` every field)."""

from __future__ import annotations

import argparse
from typing import Any

from pulsar_audit.kinds import ANOMALY_KINDS, SUBSCRIPTION_TYPE_KINDS, VIOLATION_KINDS
from serve.summary import OUTAGE_FIELDS, RUN_FIELDS

# --wide: the subscription type and the kinds of trace format v1.1 only when some run has them.
OPTIONAL_RUN_COLUMNS = ("subscription_type", *SUBSCRIPTION_TYPE_KINDS)
WIDE_RUN_COLUMNS = [f for f in RUN_FIELDS if f != "unchecked"]
WIDE_OUTAGE_COLUMNS = [f for f in OUTAGE_FIELDS if f not in ("outage_id", "causes")]
# The narrow tables: the kinds' counts summed into violations and information (`unseen` too);
# the topic only when a run has several.
NARROW_RUN_COLUMNS = [
    "run_id",
    "subscription",
    "sent",
    "acked",
    "received",
    "violations",
    "info",
    "valid",
]
NARROW_OUTAGE_COLUMNS = ["run_id", "partition", "start", "duration_ms", "backoff_step"]
INFORMATION_KINDS = tuple(k for k in ANOMALY_KINDS if k not in VIOLATION_KINDS)
WIDE_HINT = "(counts per kind: --wide or --json)"


def short_topic(topic: str) -> str:
    """`persistent://public/default/orders` → `orders`; other tenants keep their path."""
    rest = topic.removeprefix("persistent://")
    return rest.removeprefix("public/default/") if rest != topic else topic


def run_table_rows(runs: list[dict[str, Any]], wide: bool) -> tuple[list[dict], list[str]]:
    """The runs table's rows and columns."""
    if wide:
        return runs, wide_run_columns(runs)
    rows = [
        {
            **run,
            "topic": short_topic(run["topic"]),
            "violations": sum(run.get(k) or 0 for k in VIOLATION_KINDS),
            "info": sum(run.get(k) or 0 for k in INFORMATION_KINDS),
        }
        for run in runs
    ]
    columns = list(NARROW_RUN_COLUMNS)
    topics = {(run["run_id"], run["topic"]) for run in runs}
    if len(topics) > len({run for run, _ in topics}):
        columns.insert(1, "topic")
    return rows, columns


def wide_run_columns(runs: list[dict[str, Any]]) -> list[str]:
    """WIDE_RUN_COLUMNS without the optional ones no run has (a kind never found, no type)."""
    return [
        c for c in WIDE_RUN_COLUMNS if c not in OPTIONAL_RUN_COLUMNS or any(r.get(c) for r in runs)
    ]


def outage_columns(wide: bool) -> list[str]:
    return WIDE_OUTAGE_COLUMNS if wide else NARROW_OUTAGE_COLUMNS


def wide_option() -> argparse.ArgumentParser:
    wide = argparse.ArgumentParser(add_help=False)
    wide.add_argument(
        "--wide", action="store_true", help="every count in the text tables (wider than 100)"
    )
    return wide
