"""Broker, bookie and client log layouts → one row per log entry (LOG_LINES), in Spark.

Every line is tried against each layout; a file may hold several (a Python application's
output holds the C++ client's lines and its own prints; a standalone log holds broker and
bookie lines). `LAYOUTS` lists them; `layout_counts` says which ones a file uses.

* `log4j` — Pulsar's log4j2 layout (broker, proxy, bookies started with `bin/pulsar`) and the
  Java client's usual log4j2 / logback layouts:
  `2025-03-04T10:15:30,123+0000 [thread] INFO  org.apache.… - message`
  (the offset may be missing — then the ingest's time zone applies — and the date and time
  may be separated by a space, the millis by a dot: `2024-05-01 10:00:00.123 [main] INFO …`)
* `spring` — Spring Boot's default layout, a Java client inside a Spring application:
  `2024-05-01T10:00:00.123+02:00  INFO 4711 --- [app] [main] o.a.p.c.impl.ConnectionHandler : …`
* `bookkeeper` — BookKeeper's own layout (`bin/bookkeeper`), no offset:
  `2025-03-04T10:15:31,456 - WARN  - [thread:Class@78] - message`
* `cpp` — the C++/Python client's console logger since 2.6, local time without offset:
  `2023-08-10 12:56:28.338 INFO  [0x70000fc48000] HandlerBase:149 | message`
* `cpp2` — the same before 2.6, with no thread id:
  `2018-10-20 23:07:49.320 ERROR ClientConnection:638 | message`
* `go` — the Go client's logrus text layout; the fields after the message stay in it:
  `time="2024-05-01T10:00:00Z" level=info msg="Reconnecting to broker" topic="persistent://…"`

A line that matches no layout is attached to the entry above it only when it looks like a
continuation (`CONTINUATION`: an exception class, `\\tat …`, `Caused by:`, `... N more`, a
thread dump or pretty-printed JSON line, a blank line). Any other line — application output
printed between the log lines — becomes a row of its own with parse_error `not a log entry`,
so it never hides a later real entry. A continuation line with no entry above it, or a line
that starts with a date but matches no layout, also becomes a row with its own parse_error.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from pulsar_audit.log_lines import STARTS_WITH_DATE
from pulsar_audit.schemas import NOT_A_LOG_ENTRY

LEVELS = "TRACE|DEBUG|INFO|WARN|ERROR|FATAL"
_DATE = r"\d{4}-\d\d-\d\d"
_OFFSET = r"[+-]\d{4}|[+-]\d\d:\d\d|Z"


@dataclass(frozen=True)
class Layout:
    """One line layout: a regex and the group number of each field (0 = not in the layout)."""

    name: str
    regex: str
    time: int
    offset: int
    thread: int
    level: int
    logger: int
    message: int


# group 1 local time, 2 offset, 3 thread, 4 level, 5 logger, 6 message
PULSAR_LOG4J = (
    rf"^({_DATE}[T ]\d\d:\d\d:\d\d[,.]\d{{3}})({_OFFSET})? "
    rf"\[(.*?)\] ({LEVELS})\s+(\S+) - (.*)$"
)
# group 1 local time, 2 offset, 3 level, 4 thread, 5 logger (abbreviated packages), 6 message
SPRING_BOOT = (
    rf"^({_DATE}[T ]\d\d:\d\d:\d\d[.,]\d{{3}})({_OFFSET})?\s+({LEVELS})\s+\d+ --- "
    r"(?:\[[^\]]*\] )?\[\s*(.*?)\] (\S+)\s+: (.*)$"
)
# group 1 local time, 2 level, 3 thread, 4 caller class, 5 message (console and file variants)
BOOKKEEPER = (
    rf"^({_DATE}T\d\d:\d\d:\d\d,\d{{3}}) - ({LEVELS})\s+(?:- )?"
    r"\[(.*):([\w$]+)@\d+\] - (.*)$"
)
# group 1 local time, 2 level, 3 thread id, 4 source file base name, 5 message
CPP_CLIENT = rf"^({_DATE} \d\d:\d\d:\d\d\.\d{{3}}) ({LEVELS})\s+\[([^\]]*)\] (\w+):\d+ \| (.*)$"
# C++ client before 2.6 (no thread id): group 1 local time, 2 level, 3 file base name, 4 message
CPP_CLIENT_2 = rf"^({_DATE} \d\d:\d\d:\d\d\.\d{{3}}) ({LEVELS})\s+(\w+):\d+ \| (.*)$"
# Go client (logrus TextFormatter): group 1 RFC 3339 time, 2 level, 3 quoted or bare message,
# 4 the fields after it
GO_LOGRUS = r'^time="?([0-9T:.+\-Z]+)"? level=(\w+) msg=("(?:[^"\\]|\\.)*"|\S*)(.*)$'

LAYOUTS = (
    Layout("log4j", PULSAR_LOG4J, time=1, offset=2, thread=3, level=4, logger=5, message=6),
    Layout("spring", SPRING_BOOT, time=1, offset=2, thread=4, level=3, logger=5, message=6),
    Layout("bookkeeper", BOOKKEEPER, time=1, offset=0, thread=3, level=2, logger=4, message=5),
    Layout("cpp", CPP_CLIENT, time=1, offset=0, thread=3, level=2, logger=4, message=5),
    Layout("cpp2", CPP_CLIENT_2, time=1, offset=0, thread=0, level=2, logger=3, message=4),
    Layout("go", GO_LOGRUS, time=1, offset=0, thread=0, level=2, logger=0, message=3),
)
GO_LOGGER = "pulsar-client-go"

# What may follow a log entry on lines of its own: a Java stack trace (exception class with or
# without a message, frames, causes, suppressed, elided frames), a thread dump, a
# pretty-printed JSON dump (Jackson's `"key" : value`), blank lines.
CONTINUATION = "|".join(
    [
        r"^\s*$",
        r"^\s+at \S",
        r"^\s*Caused by: ",
        r"^\s*Suppressed: ",
        r"^\s*\.\.\. \d+ (?:more|common frames omitted)",
        r"^(?:[a-z_][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)[\w$]*(?::.*)?$",
        r"^\s+- (?:locked|waiting|parking|eliminated) ",
        r'^"[^"]+" #\d+ ',
        r"^\s+java\.lang\.Thread\.State: ",
        r'^\s*"[^"]*" : ',
        r"^\s*[\[\]{}],?$",
    ]
)

ERR_ORPHAN = "continuation line with no log entry above it (no timestamp, first lines of the file)"
ERR_LAYOUT = (
    "starts with a date but matches no known layout "
    "(log4j2, Spring Boot, BookKeeper, C++ client, Go client)"
)
ERR_NOT_ENTRY = NOT_A_LOG_ENTRY


def _nonempty(column: Column) -> Column:
    """The group's text, or null when it matched nothing (an optional group left out)."""
    return F.when(column != "", column)


def _local_ts(local: Column, offset: Column, zone: str) -> Column:
    """`yyyy-MM-dd[T ]HH:mm:ss[,.]SSS` with an optional offset; without one, read in `zone`."""
    normal = F.regexp_replace(F.regexp_replace(local, "T", " "), ",", ".")
    fixed = F.regexp_replace(F.regexp_replace(offset, "Z", "+0000"), ":", "")
    with_offset = F.try_to_timestamp(F.concat(normal, fixed), F.lit("yyyy-MM-dd HH:mm:ss.SSSxx"))
    in_zone = F.try_to_timestamp(
        F.concat(normal, F.lit(f" {zone}")), F.lit("yyyy-MM-dd HH:mm:ss.SSS VV")
    )
    return F.when(offset.isNotNull(), with_offset).otherwise(in_zone)


def _go_ts(rfc3339: Column, zone: str) -> Column:
    """RFC 3339 (logrus' default) with its offset; without one, read in `zone`."""
    has_offset = rfc3339.rlike(r"(Z|[+-]\d\d:?\d\d)$")
    with_offset = F.try_to_timestamp(rfc3339)
    in_zone = F.to_utc_timestamp(F.try_to_timestamp(rfc3339), zone)
    return F.when(has_offset, with_offset).otherwise(in_zone)


def _go_level(level: Column) -> Column:
    upper = F.upper(level)
    return F.when(upper == "WARNING", "WARN").when(upper == "PANIC", "FATAL").otherwise(upper)


def _go_message(quoted: Column, fields: Column) -> Column:
    """The logrus message unquoted, then its fields as written (`topic="…" consumerID=1`)."""
    bare = F.regexp_replace(F.regexp_replace(quoted, r'^"|"$', ""), r'\\(["\\])', "$1")
    rest = F.trim(fields)
    return F.when(rest == "", bare).otherwise(F.concat(bare, F.lit(" "), rest))


# The groups a layout may have (Layout's fields), and the Go layout's fields after its message.
GROUPS = ("time", "offset", "thread", "level", "logger", "message")
GO_FIELDS = 4


def _first_layout(value: Column) -> Column:
    """The name of the first layout `value` matches; null when none does."""
    chosen = None
    for layout in LAYOUTS:
        matched, name = value.rlike(layout.regex), F.lit(layout.name)
        chosen = F.when(matched, name) if chosen is None else chosen.when(matched, name)
    return chosen


def _layout_group(value: Column, layout_name: Column, group: str) -> Column:
    """`group`'s text in the line's own layout (a regex evaluated for that layout only); null
    when the layout has no such group or the line none."""
    chosen = F.lit(None).cast("string")
    for layout in LAYOUTS:
        index = getattr(layout, group)
        if index:
            extracted = F.regexp_extract(value, layout.regex, index)
            chosen = F.when(layout_name == layout.name, extracted).otherwise(chosen)
    return chosen


def with_layout_fields(lines: DataFrame, zone: str = "UTC") -> DataFrame:
    """Add layout, ts, level, thread, logger, message and is_start from the line's layout.

    lines: source_file, line_number, value. zone: the time zone of offset-less timestamps.

    In three projections, each a column the next reads several times: the line without its
    CR, the layout it matches first, then each group of that layout, so that every regex runs
    once per line (a single projection repeats them: without generated code, Spark evaluates
    an expression of a CASE branch again at each use).
    """
    layout, value = F.col("layout"), F.col("value")
    laid = lines.select(
        "source_file", "line_number", F.regexp_replace("value", r"\r$", "").alias("value")
    ).withColumn("layout", _first_layout(value))
    go = F.regexp_extract(value, GO_LOGRUS, GO_FIELDS)
    grouped = laid.select(
        "*",
        *[_layout_group(value, layout, group).alias(f"_{group}") for group in GROUPS],
        F.when(layout == "go", go).alias("_go_fields"),
    )
    time, offset = _nonempty(F.col("_time")), _nonempty(F.col("_offset"))
    level, message = _nonempty(F.col("_level")), F.col("_message")
    is_go = layout == "go"
    known = layout.isNotNull()
    return grouped.select(
        "source_file",
        "line_number",
        "value",
        "layout",
        known.alias("is_start"),
        F.when(is_go, _go_ts(time, zone)).when(known, _local_ts(time, offset, zone)).alias("ts"),
        F.when(is_go, _go_level(level)).when(known, level).alias("level"),
        F.when(known & ~is_go, _nonempty(F.col("_thread"))).alias("thread"),
        F.when(is_go, F.lit(GO_LOGGER)).when(known, _nonempty(F.col("_logger"))).alias("logger"),
        F.coalesce(
            F.when(is_go, _go_message(message, F.col("_go_fields"))).when(known, message),
            F.lit(""),
        ).alias("message"),
    )


def is_continuation(value: Column) -> Column:
    """The line looks like the rest of the entry above (a stack trace, a dump, a blank line)."""
    return value.rlike(CONTINUATION)


def with_entry_number(lines: DataFrame) -> DataFrame:
    """Number the entries of each file: a running count of entry starts, in line order.

    An entry starts at a line of a known layout, at a line that starts with a date but matches
    no layout (a broken line must not swallow the lines after it), and at any line that does
    not look like a continuation (application output is a row of its own).
    """
    starts_entry = (
        F.col("is_start")
        | F.col("value").rlike(STARTS_WITH_DATE)
        | ~is_continuation(F.col("value"))
    )
    in_file_order = (
        W.partitionBy("source_file")
        .orderBy("line_number")
        .rowsBetween(W.unboundedPreceding, W.currentRow)
    )
    return lines.withColumn("entry", F.sum(starts_entry.cast("long")).over(in_file_order))


def to_entries(lines: DataFrame) -> DataFrame:
    """Fold continuation lines into their entry; other lines keep a parse_error.

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
        .when(first["value"].rlike(STARTS_WITH_DATE), F.lit(ERR_LAYOUT))
        .otherwise(F.lit(ERR_NOT_ENTRY))
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
