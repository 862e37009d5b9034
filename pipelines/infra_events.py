"""Bronze broker/bookie/client log entries and ZooKeeper changes → silver.infra_events.

Matching stays in Spark: the pattern table (pipelines.log_patterns) becomes one CASE chain
that picks the first matching pattern per entry, then one `regexp_extract` per named group.
`build_infra_events` then corrects each host's clock (pipelines.clock_skew).
"""

from __future__ import annotations

import hashlib
import logging

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.clock_skew import (
    UNCORRECTED,
    describe_whole_hour_offset,
    estimate_offsets,
    whole_hour_offsets,
    with_corrected_ts,
)
from pipelines.consumer_attribution import with_consumer_topics
from pipelines.log_patterns import COLUMN_GROUPS, PATTERNS, LogPattern
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import INFRA_EVENTS, conform
from pulsar_audit.spark import checkpointed, release, session_settings

log = logging.getLogger(__name__)

LOG_TABLES = ("broker_log", "bookie_log", "client_log")
EVENT_SOURCES = ["broker", "bookie", "client", "zookeeper"]


# The pattern table becomes three very wide expressions (a CASE chain over ~120 patterns and
# the named groups' extraction). They are written as SQL text, parsed once in the JVM: built
# with the Column API they cost one py4j round trip per node, thousands per build (seconds).


def sql_string(value: str) -> str:
    """`value` as a Spark SQL string literal (backslash escapes on, Spark's default)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def pattern_number(patterns: list[LogPattern]) -> Column:
    """Index of the first pattern the entry matches (null when none does)."""
    cases = " ".join(
        f"WHEN source IN ({', '.join(sql_string(s) for s in p.sources)}) "
        f"AND logger RLIKE {sql_string(p.logger)} "
        f"AND message RLIKE {sql_string(p.java_message())} THEN {number}"
        for number, p in enumerate(patterns)
    )
    return F.expr(f"CASE {cases} END")


def _extracted(p: LogPattern, group: str) -> str:
    return f"regexp_extract(message, {sql_string(p.java_message())}, {p.groups()[group]})"


def _extract(patterns: list[LogPattern], group: str) -> Column:
    """The named group's text from whichever pattern matched (null if it has no such group)."""
    cases = " ".join(
        f"WHEN {number} THEN nullif({_extracted(p, group)}, '')"
        for number, p in enumerate(patterns)
        if group in p.groups()
    )
    return F.expr(f"CASE _pattern {cases} END" if cases else "CAST(NULL AS STRING)")


def _detail(patterns: list[LogPattern]) -> Column:
    """The matched pattern's other named groups as a JSON object (empty groups left out)."""
    cases = []
    for number, p in enumerate(patterns):
        extras = [g for g in p.groups() if g not in COLUMN_GROUPS]
        if not extras:
            continue
        pairs = ", ".join(f"{sql_string(g)}, {_extracted(p, g)}" for g in extras)
        cases.append(f"WHEN {number} THEN to_json(map_filter(map({pairs}), (k, v) -> v != ''))")
    return F.expr(f"CASE _pattern {' '.join(cases)} END" if cases else "CAST(NULL AS STRING)")


def ml_to_topic(ml: Column) -> Column:
    """Managed-ledger name tenant/ns/persistent/t → topic persistent://tenant/ns/t."""
    return F.regexp_replace(ml, r"^([^/]+)/([^/]+)/((?:non-)?persistent)/(.*)$", "$3://$1/$2/$4")


def event_id(*parts: str) -> Column:
    return F.sha2(F.concat_ws("|", *[F.col(p).cast("string") for p in parts]), 256)


def match_log_events(entries: DataFrame, patterns: list[LogPattern] | None = None) -> DataFrame:
    """Parsed log entries (LOG_LINES) → one infra event per entry that matches a pattern.

    Client consumer lines without a topic get it from `with_consumer_topics`, applied to the
    events of every source (build_infra_events does so once they are cached).
    """
    patterns = patterns or PATTERNS
    matched = entries.filter(F.col("parse_error").isNull() & F.col("ts").isNotNull()).withColumn(
        "_pattern", pattern_number(patterns)
    )
    events = matched.filter(F.col("_pattern").isNotNull()).select(
        "ts",
        "host",
        "source",
        F.element_at(
            F.array(*[F.lit(p.event_type) for p in patterns]), F.col("_pattern") + 1
        ).alias("event_type"),
        F.coalesce(_extract(patterns, "topic"), ml_to_topic(_extract(patterns, "ml"))).alias(
            "topic"
        ),
        _extract(patterns, "bundle").alias("bundle"),
        _extract(patterns, "ledger_id").try_cast("long").alias("ledger_id"),
        _extract(patterns, "bookie").alias("bookie"),
        _detail(patterns).alias("detail"),
        "raw",
        "source_file",
        "line_number",
    )
    return events.withColumns(
        {
            "event_id": event_id("source_file", "line_number", "event_type"),
            "corrected_ts": F.col("ts"),
            "clock": F.lit(UNCORRECTED),
        }
    ).transform(lambda df: conform(df, INFRA_EVENTS))


def patterns_fingerprint() -> str:
    """A short hash of the pattern table: events must be re-matched when it changes."""
    return hashlib.sha256(repr(PATTERNS).encode()).hexdigest()[:16]


def refresh_infra_events(lakehouse: Lakehouse, changed: bool = False) -> bool:
    """Rebuild silver.infra_events unless its inputs are as they were last time; True if rebuilt.

    The inputs are the log tables and zk_changes (their Delta versions) and the pattern table.
    changed: the job has just ingested logs or ZooKeeper changes (no need to compare).
    """
    tables = [*LOG_TABLES, "zk_changes"]

    def fingerprint() -> str:
        return f"{patterns_fingerprint()};{sorted(lakehouse.versions(tables).items())}"

    if not changed and lakehouse.stage_is_current("infra_events", fingerprint()):
        log.info("infra events: logs and ZooKeeper changes unchanged, timeline kept")
        return False
    if not any(lakehouse.written(table) for table in tables):
        log.info("infra events: no log or ZooKeeper change was ever ingested, no timeline")
        return False
    build_infra_events(lakehouse)
    lakehouse.record_stage("infra_events", fingerprint)
    return True


def build_infra_events(lakehouse: Lakehouse) -> int:
    """Recompute silver.infra_events (and silver.clock_offsets) from bronze logs and zk_changes.

    Events are matched, each host's clock offset is estimated from events seen on two
    sides, and `corrected_ts` is set from it. Both tables are replaced in full.
    """
    from pipelines.zk_events import zk_change_events

    log_entries = _union([lakehouse.read(t) for t in LOG_TABLES])
    # The pattern chain is one very wide expression: whole-stage code generation of it
    # outgrows Java's 64 KB method limit (Spark logs an ERROR and falls back after seconds
    # of trying), so it is evaluated without; and the matched events are checkpointed, so
    # that the jobs after it do not carry (and re-plan) that expression again.
    with session_settings(lakehouse.spark, {"spark.sql.codegen.wholeStage": "false"}):
        matched = (
            match_log_events(log_entries)
            .unionByName(zk_change_events(lakehouse.read("zk_changes")))
            .transform(checkpointed)
        )
    attributed = checkpointed(matched.transform(with_consumer_topics))
    try:
        offsets = estimate_offsets(attributed)
        for row in whole_hour_offsets(attributed).collect():
            log.warning(describe_whole_hour_offset(row.host, row.hours, row.matches))
        lakehouse.overwrite("clock_offsets", offsets)
        events = with_corrected_ts(attributed, lakehouse.read("clock_offsets"))
        count = lakehouse.replace_where("infra_events", events, {"source": EVENT_SOURCES})
    finally:
        release(attributed)
        release(matched)
    log.info("infra events: %d rows", count)
    return count


def _union(parts: list[DataFrame]) -> DataFrame:
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result
