"""Row-level gate: every row rule is evaluated in the ingest's one pass; GX judges the counts.

Each record bound for an event table gets `_violated`, the names of the rules of that table it
breaks (a Spark Column per rule, declared once in checks/rules.py); a record that breaks any
goes to quarantine with the reasons. The ingest aggregates the violations per (run, table, rule)
in the same pass, and Great Expectations judges that small frame, as `checks/tables.py` does
for table-level checks: GX stays the judge, no row is scanned twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import pandas as pd
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from checks.rules import ROW_RULES
from pulsar_audit.local_frames import local_frame
from pulsar_audit.row_gate import RowGate
from pulsar_audit.schemas import CHECK_RESULTS

ROW_LEVEL = "row"
_GATED = "_gated"
_SEPARATOR = ","  # between rule names in `violated_rules`: no rule name holds it


def _rule_names() -> list[str]:
    return sorted({rule.name for rules in ROW_RULES.values() for rule in rules})


def violated_rules(table: Column, tables: Iterable[str] | None = None) -> Column:
    """The names of the rules of `table` (a Column naming the row's table) that a row breaks.

    tables: the tables a row may be bound for (default all; the frame needs their columns).
    """
    none = F.array().cast("array<string>")
    chosen = none
    for name in tables or ROW_RULES:
        rules = ROW_RULES[name]
        broken = F.lit(False)
        for rule in rules:
            broken = broken | rule.violation()
        # the array is built only for a row that breaks a rule (most rows break none); from
        # the names joined (concat_ws skips the rules kept) rather than `array_compact`, which
        # Spark 4 rewrites to a lambda that has no generated code and so took the projection
        # out of whole-stage code (session 42 measured no difference either way; session 45's
        # figures are with this form; rule names hold no comma: tests/checks)
        names = F.split(
            F.concat_ws(_SEPARATOR, *[F.when(r.violation(), F.lit(r.name)) for r in rules]),
            _SEPARATOR,
        )
        chosen = F.when(table == name, F.when(broken, names).otherwise(none)).otherwise(chosen)
    return chosen


def violation_reasons(table: Column) -> Column:
    """'rule: what it requires; …' for every rule of `table` the row breaks."""
    chosen = F.lit("")
    for name, rules in ROW_RULES.items():
        reasons = [F.when(r.violation(), F.lit(r.reason())) for r in rules]
        chosen = F.when(table == name, F.concat_ws("; ", *reasons)).otherwise(chosen)
    return chosen


def violation_counts(gated: Column) -> list[Column]:
    """Aggregates over rows with `_violated`: rows gated, and rows breaking each rule."""
    counts = [F.sum(gated.cast("long")).alias(_GATED)]
    return counts + [
        F.sum(F.array_contains("_violated", name).cast("long")).alias(f"rule_{name}")
        for name in _rule_names()
    ]


def per_run_counts(counts: Iterable[Row], table_of: dict[str, str]) -> dict[str, pd.DataFrame]:
    """Count rows (with `role`, `run_id` and `violation_counts`) → per table, one row per run.

    table_of: role → table. Runs without gated rows of a table are left out of its frame.
    """
    totals: dict[tuple[str, str], dict[str, int]] = {}
    for row in counts:
        table = table_of.get(row["role"])
        if table is None or not row[_GATED]:
            continue
        entry = totals.setdefault((table, row["run_id"]), {})
        for rule in ROW_RULES[table]:
            entry[rule.name] = entry.get(rule.name, 0) + int(row[f"rule_{rule.name}"] or 0)
    frames = {}
    for table, rules in ROW_RULES.items():
        rows = [{"run_id": run, **c} for (t, run), c in sorted(totals.items()) if t == table]
        frames[table] = pd.DataFrame(rows, columns=["run_id", *[r.name for r in rules]])
    return frames


def judge_rows(
    spark: SparkSession, frames: dict[str, pd.DataFrame], ingest_id: str, at: datetime
) -> DataFrame:
    """GX judges each table's per-run violation counts: one check_results row per (run, rule)."""
    import great_expectations.expectations as gxe

    from checks.gx import validate

    results = []
    for table, frame in frames.items():
        if frame.empty:
            continue
        rules = ROW_RULES[table]
        expectations = [
            gxe.ExpectColumnValuesToBeBetween(
                column=r.name, min_value=0, max_value=0, meta={"rule": r.name}
            )
            for r in rules
        ]
        outcomes = validate(frame, f"{table}_rows", expectations, index_columns=["run_id"])
        failed = {o.name: {i["run_id"] for i in o.unexpected_index} for o in outcomes}
        for record in frame.to_dict("records"):
            for r in rules:
                count = int(record[r.name])
                results.append(
                    (
                        record["run_id"],
                        table,
                        r.name,
                        r.column,
                        ROW_LEVEL,
                        record["run_id"] not in failed[r.name],
                        str(count),
                        count,
                        ingest_id,
                        at,
                    )
                )
    return local_frame(spark, results, CHECK_RESULTS)


def judge_counts(
    spark: SparkSession,
    counts: Iterable[Row],
    table_of: dict[str, str],
    ingest_id: str,
    at: datetime,
) -> DataFrame | None:
    """GX's verdicts on a batch's count rows (see `per_run_counts`); None: no row was gated."""
    frames = per_run_counts(counts, table_of)
    if all(frame.empty for frame in frames.values()):
        return None
    return judge_rows(spark, frames, ingest_id, at)


# The gate the jobs hand to the trace ingest (ingest/traces.py applies it in its one pass).
ROW_GATE = RowGate(
    level=ROW_LEVEL,
    violated=violated_rules,
    reasons=violation_reasons,
    counts=violation_counts,
    judge=judge_counts,
)
