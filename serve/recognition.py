"""How much of each source's logs pulsar-audit understands, and what it does not.

An entry is *recognized* when a pattern of pipelines.log_patterns matches it (it became, or
would become, an infrastructure event). The rest is *unmatched*: entries of a known layout that
no pattern matches, and rows kept with a parse_error (application output, broken lines).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.infra_events import LOG_TABLES, pattern_number
from pipelines.log_patterns import PATTERNS, LogPattern
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import NOT_A_LOG_ENTRY

# digits, hex and addresses vary between lines of one kind: masked before grouping in Spark
_VARIABLE = r"0x[0-9a-fA-F]+|\d+(?:[.:]\d+)*"
MAX_FORMS = 20_000
UNPARSED = "[unparsed]"  # the logger shown for rows kept with a parse_error


def _held_lines() -> Column:
    return F.size(F.split(F.col("raw"), "\n"))


def with_recognition(entries: DataFrame, patterns: list[LogPattern] | None = None) -> DataFrame:
    """Add `recognized` (a pattern matches the entry) to LOG_LINES rows."""
    is_entry = F.col("parse_error").isNull() & F.col("ts").isNotNull()
    matched = pattern_number(patterns or PATTERNS).isNotNull()
    return entries.withColumn("recognized", F.coalesce(is_entry & matched, F.lit(False)))


def recognition_counts(
    entries: DataFrame, patterns: list[LogPattern] | None = None, by: str = "source"
) -> DataFrame:
    """Per source (or per `by` column): lines, entries, recognized, not_log_entries,
    parse_errors — a small frame.

    lines: input lines (continuation lines included); entries: rows without a parse_error;
    recognized: those a pattern matches; not_log_entries: rows of application output;
    parse_errors: every row with a parse_error (not_log_entries included).
    """
    has_error = F.col("parse_error").isNotNull()
    is_not_entry = F.coalesce(F.col("parse_error") == NOT_A_LOG_ENTRY, F.lit(False))
    return (
        entries.transform(with_recognition, patterns)
        .groupBy(by)
        .agg(
            F.sum(_held_lines()).cast("long").alias("lines"),
            F.sum((~has_error).cast("long")).alias("entries"),
            F.sum(F.col("recognized").cast("long")).alias("recognized"),
            F.sum(is_not_entry.cast("long")).alias("not_log_entries"),
            F.sum(has_error.cast("long")).alias("parse_errors"),
        )
    )


def unmatched_forms(entries: DataFrame, patterns: list[LogPattern] | None = None) -> DataFrame:
    """Unrecognized rows grouped by their text with numbers masked: form, count, example.

    Out: source, logger, form, count, example (one raw line of that form). The grouping is done
    in Spark so that only distinct forms, not every line, leave it.
    """
    first_line = F.split(F.coalesce(F.col("message"), F.col("raw")), "\n")[0]
    logger = F.coalesce(F.col("logger"), F.lit("(no logger)"))
    return (
        entries.transform(with_recognition, patterns)
        .filter(~F.col("recognized"))
        .select(
            "source",
            F.when(F.col("parse_error").isNotNull(), F.lit(UNPARSED))
            .otherwise(logger)
            .alias("logger"),
            F.regexp_replace(first_line, _VARIABLE, "<n>").alias("form"),
            F.split(F.col("raw"), "\n")[0].alias("line"),
        )
        .groupBy("source", "logger", "form")
        .agg(F.count(F.lit(1)).alias("count"), F.min("line").alias("example"))
    )


def _log_entries(
    lakehouse: Lakehouse, sources: list[str] | None, files: list[str] | None = None
) -> DataFrame:
    parts = [lakehouse.read(t) for t in LOG_TABLES]
    entries = parts[0]
    for part in parts[1:]:
        entries = entries.unionByName(part)
    if sources:
        entries = entries.filter(F.col("source").isin(sources))
    if files is not None:
        entries = entries.filter(F.col("source_file").isin(files))
    return entries


def recognized_by_source(
    lakehouse: Lakehouse, sources: list[str] | None = None, files: list[str] | None = None
) -> list[dict[str, Any]]:
    """bronze *_log → one dict per source: lines, entries, recognized, not_log_entries, ...

    For the analyze summary: `recognized 412 of 1,068 client entries`. files: only the lines
    of these log files (their identity paths, as `source_file` holds them); None: every file.
    """
    counts = recognition_counts(_log_entries(lakehouse, sources, files))
    return [r.asDict() for r in counts.orderBy("source").collect()]


def unmatched_rows(
    lakehouse: Lakehouse, sources: list[str] | None = None, limit: int = MAX_FORMS
) -> list[dict[str, Any]]:
    """The most frequent unmatched forms (at most `limit`), as dicts, most frequent first."""
    forms = unmatched_forms(_log_entries(lakehouse, sources))
    ordered = forms.orderBy(F.col("count").desc(), "source", "logger", "form").limit(limit)
    return [r.asDict() for r in ordered.collect()]


def describe_recognition(row: dict[str, Any]) -> str:
    """`recognized 412 of 1,068 client entries (1,200 lines, 15 not log entries)`."""
    return (
        f"recognized {row['recognized']:,} of {row['entries']:,} {row['source']} entries "
        f"({row['lines']:,} lines, {row['not_log_entries']:,} not log entries)"
    )
