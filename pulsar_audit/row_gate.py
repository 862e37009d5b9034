"""What an ingest needs of the row rules it applies in its one pass: the contract between
ingest/ (which evaluates them on every record) and checks/ (which owns them; checks/gate.py
builds the gate the jobs wire in)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame, Row, SparkSession


@dataclass(frozen=True)
class RowGate:
    # check_results.level of the gate's verdicts
    level: str
    # (a Column naming a row's table) → the names of the rules of that table the row breaks
    violated: Callable[[Column], Column]
    # (a Column naming a row's table) → 'rule: what it requires; …' for every rule it breaks
    reasons: Callable[[Column], Column]
    # (a Column: the row was gated) → aggregates of rows gated and rows breaking each rule
    counts: Callable[[Column], list[Column]]
    # (spark, a batch's count rows, role → table, ingest id, time) → check_results rows of
    # the batch's per-run rule counts, None when no row was gated
    judge: Callable[[SparkSession, Iterable[Row], dict[str, str], str, datetime], DataFrame | None]
