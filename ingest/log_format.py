"""Broker, bookie and client log layouts → one row per log entry (LOG_LINES), in Spark.

Three layouts are recognised on every line, whatever the source:

* Pulsar's log4j2 layout (broker, and bookies started with `bin/pulsar`):
  `2025-03-04T10:15:30,123+0000 [thread] INFO  org.apache.… - message`
* BookKeeper's own layout (`bin/bookkeeper`):
  `2025-03-04T10:15:31,456 - WARN  - [thread:Class@78] - message`
  (no offset in the timestamp: read in the ingest's time zone, UTC unless told otherwise)
* the C++/Python client's console logger:
  `2023-08-10 12:56:28.338 INFO  [0x70000fc48000] HandlerBase:149 | message`
  (local time without offset: read in the ingest's time zone, UTC unless told otherwise)

A line that matches no layout continues the entry above it (stack traces, multi-line config
dumps). Such lines are kept with their entry: `raw` holds every line of it and `line_number`
is that of its first line. A continuation line with no entry above it, or a line that starts
with a date but matches no layout, becomes a row of its own with `parse_error` set.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

LEVELS = "TRACE|DEBUG|INFO|WARN|ERROR|FATAL"

# group 1 local time, 2 offset, 3 thread, 4 level, 5 logger, 6 message
PULSAR_LOG4J = (
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3})([+-]\d{4}|[+-]\d\d:\d\d|Z) "
    rf"\[(.*?)\] ({LEVELS})\s+(\S+) - (.*)$"
)
# group 1 local time, 2 level, 3 thread, 4 caller class, 5 message (console and file variants)
BOOKKEEPER = (
    rf"^(\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{{3}}) - ({LEVELS})\s+(?:- )?"
    r"\[(.*):([\w$]+)@\d+\] - (.*)$"
)
# group 1 local time, 2 level, 3 thread id, 4 source file base name, 5 message
CPP_CLIENT = (
    rf"^(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{{3}}) ({LEVELS})\s+\[([^\]]*)\] "
    r"(\w+):\d+ \| (.*)$"
)
STARTS_WITH_DATE = r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d"

ERR_ORPHAN = "continuation line with no log entry above it (no timestamp, first lines of the file)"
ERR_LAYOUT = "starts with a date but matches no known layout (log4j2, BookKeeper, C++ client)"


def _group(value: Column, pattern: str, index: int) -> Column:
    extracted = F.regexp_extract(value, pattern, index)
    return F.when(extracted != "", extracted)


def _zoned(local: Column, zone: str, fmt: str) -> Column:
    """Local time string read in `zone` (a region id like Europe/Berlin, or UTC)."""
    return F.to_timestamp(F.concat(local, F.lit(f" {zone}")), f"{fmt} VV")


def with_layout_fields(lines: DataFrame, zone: str = "UTC") -> DataFrame:
    """Add ts, level, thread, logger, message and is_start from whichever layout the line has.

    lines: source_file, line_number, value. zone: the time zone of offset-less timestamps.
    """
    value = F.regexp_replace(F.col("value"), r"\r$", "")
    l4j, bk, cpp = (value.rlike(p) for p in (PULSAR_LOG4J, BOOKKEEPER, CPP_CLIENT))
    offset = F.regexp_replace(
        F.regexp_replace(_group(value, PULSAR_LOG4J, 2), "Z", "+0000"), ":", ""
    )
    l4j_ts = F.to_timestamp(
        F.concat(_group(value, PULSAR_LOG4J, 1), offset), "yyyy-MM-dd'T'HH:mm:ss,SSSxx"
    )
    bk_ts = _zoned(_group(value, BOOKKEEPER, 1), zone, "yyyy-MM-dd'T'HH:mm:ss,SSS")
    cpp_ts = _zoned(_group(value, CPP_CLIENT, 1), zone, "yyyy-MM-dd HH:mm:ss.SSS")

    def pick(l4j_col: Column, bk_col: Column, cpp_col: Column) -> Column:
        return F.when(l4j, l4j_col).when(bk, bk_col).when(cpp, cpp_col)

    return lines.select(
        "source_file",
        "line_number",
        value.alias("value"),
        (l4j | bk | cpp).alias("is_start"),
        pick(l4j_ts, bk_ts, cpp_ts).alias("ts"),
        pick(
            *(_group(value, p, i) for p, i in ((PULSAR_LOG4J, 4), (BOOKKEEPER, 2), (CPP_CLIENT, 2)))
        ).alias("level"),
        pick(
            *(_group(value, p, i) for p, i in ((PULSAR_LOG4J, 3), (BOOKKEEPER, 3), (CPP_CLIENT, 3)))
        ).alias("thread"),
        pick(
            *(_group(value, p, i) for p, i in ((PULSAR_LOG4J, 5), (BOOKKEEPER, 4), (CPP_CLIENT, 4)))
        ).alias("logger"),
        pick(
            *(
                F.regexp_extract(value, p, i)
                for p, i in ((PULSAR_LOG4J, 6), (BOOKKEEPER, 5), (CPP_CLIENT, 5))
            )
        ).alias("message"),
    )


def with_entry_number(lines: DataFrame) -> DataFrame:
    """Number the entries of each file: a running count of entry starts, in line order.

    Lines that start with a date but match no layout start an entry of their own (a broken
    line must not swallow the lines after it into the entry before it).
    """
    starts_entry = F.col("is_start") | F.col("value").rlike(STARTS_WITH_DATE)
    in_file_order = (
        W.partitionBy("source_file")
        .orderBy("line_number")
        .rowsBetween(W.unboundedPreceding, W.currentRow)
    )
    return lines.withColumn("entry", F.sum(starts_entry.cast("long")).over(in_file_order))


def to_entries(lines: DataFrame) -> DataFrame:
    """Fold continuation lines into their entry; orphans and broken lines keep a parse_error.

    Out: source_file, line_number (of the entry's first line), ts, level, thread, logger,
    message (first line's message, then the continuation lines), raw (all lines), parse_error,
    lines (how many input lines the row holds).
    """
    is_orphan = F.col("entry") == 0
    # Orphans have no entry to join: each is keyed by its own line number instead.
    key = F.when(is_orphan, -F.col("line_number")).otherwise(F.col("entry"))
    fields = ("line_number", "value", "is_start", "message", "ts", "level", "thread", "logger")
    ordered = F.array_sort(F.collect_list(F.struct(*fields)))
    grouped = lines.groupBy("source_file", key.alias("_key")).agg(ordered.alias("_lines"))
    first = F.col("_lines")[0]
    continuation = F.transform(F.slice("_lines", 2, 1 << 30), lambda x: x["value"])
    first_is_entry = first["is_start"]
    parse_error = (
        F.when(first_is_entry, F.lit(None).cast("string"))
        .when(F.col("_key") < 0, F.lit(ERR_ORPHAN))
        .otherwise(F.lit(ERR_LAYOUT))
    )
    return grouped.select(
        "source_file",
        first["line_number"].alias("line_number"),
        first["ts"].alias("ts"),
        first["level"].alias("level"),
        first["thread"].alias("thread"),
        first["logger"].alias("logger"),
        F.when(
            first_is_entry,
            F.concat_ws("\n", F.concat(F.array(first["message"]), continuation)),
        ).alias("message"),
        F.concat_ws("\n", F.transform("_lines", lambda x: x["value"])).alias("raw"),
        parse_error.alias("parse_error"),
        F.size("_lines").cast("long").alias("lines"),
    )


def parse_log_lines(lines: DataFrame, zone: str = "UTC") -> DataFrame:
    """Numbered raw lines (source_file, line_number, value) → one row per log entry."""
    return (
        lines.transform(with_layout_fields, zone).transform(with_entry_number).transform(to_entries)
    )
