"""Row-level gate: GX judges a batch bound for bronze; violating rows go to quarantine."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from checks.gx import Outcome, validate
from checks.rules import ROW_RULES, Rule
from pulsar_audit.schemas import CHECK_RESULTS, QUARANTINE, conform


class GateDisagreement(RuntimeError):
    """GX and the Spark rendering of a rule counted different violations (a bug, not bad data)."""


@dataclass(frozen=True)
class GateResult:
    passed: DataFrame
    quarantined: DataFrame
    check_results: DataFrame
    outcomes: list[Outcome]


def with_violations(df: DataFrame, rules: list[Rule]) -> DataFrame:
    """Add `_violated`: the names of the rules each row breaks (empty array when none)."""
    names = [F.when(rule.violation(), F.lit(rule.name)) for rule in rules]
    return df.withColumn("_violated", F.array_compact(F.array(*names)))


def _reason_of(rules: list[Rule]) -> F.Column:
    reasons = [F.when(rule.violation(), F.lit(rule.reason())) for rule in rules]
    return F.concat_ws("; ", F.array_compact(F.array(*reasons)))


def gate_rows(df: DataFrame, table: str, ingest_id: str, at: datetime) -> GateResult:
    """Validate `df` (rows bound for bronze `table`) and split it into passed and quarantined.

    `df` should be persisted by the caller: GX and Spark both scan it.
    """
    rules = ROW_RULES[table]
    outcomes = validate(df, f"{table}_rows", [rule.expectation() for rule in rules])
    flagged = with_violations(df, rules)
    counts = flagged.select(
        *[F.sum(F.array_contains("_violated", r.name).cast("long")).alias(r.name) for r in rules]
    ).first()
    for outcome in outcomes:
        spark_count = (counts[outcome.name] or 0) if counts is not None else 0
        if (outcome.unexpected_count or 0) != spark_count:
            raise GateDisagreement(
                f"{table}.{outcome.name}: GX counted {outcome.unexpected_count} unexpected rows, "
                f"the Spark rule {spark_count}"
            )
    bad = F.size("_violated") > 0
    quarantined = flagged.filter(bad).select(
        F.lit(table).alias("target_table"),
        "run_id",
        "source_file",
        "line_number",
        "raw",
        _reason_of(rules).alias("reason"),
        F.concat_ws(",", "_violated").alias("check"),
        F.lit(ingest_id).alias("ingest_id"),
        F.lit(at).cast(T.TimestampType()).alias("quarantined_at"),
    )
    passed = flagged.filter(~bad).drop("_violated")
    results = _per_run_results(flagged, table, rules, ingest_id, at)
    return GateResult(passed, conform(quarantined, QUARANTINE), results, outcomes)


def _per_run_results(
    flagged: DataFrame, table: str, rules: list[Rule], ingest_id: str, at: datetime
) -> DataFrame:
    """One check_results row per (run, rule): how many of the run's rows broke it."""
    per_run = flagged.groupBy("run_id").agg(
        *[F.sum(F.array_contains("_violated", r.name).cast("long")).alias(r.name) for r in rules]
    )
    entries = F.array(
        *[
            F.struct(
                F.lit(r.name).alias("expectation"),
                F.lit(r.column).alias("column"),
                F.col(r.name).alias("unexpected_count"),
            )
            for r in rules
        ]
    )
    return conform(
        per_run.select("run_id", F.explode(entries).alias("e")).select(
            "run_id",
            F.lit(table).alias("table"),
            "e.expectation",
            "e.column",
            F.lit("row").alias("level"),
            (F.col("e.unexpected_count") == 0).alias("success"),
            F.col("e.unexpected_count").cast("string").alias("observed_value"),
            "e.unexpected_count",
            F.lit(ingest_id).alias("ingest_id"),
            F.lit(at).cast(T.TimestampType()).alias("checked_at"),
        ),
        CHECK_RESULTS,
    )
