"""Trace format v1 (docs/trace-format.md): parse JSON lines into typed events, or a reason why not.

Each line is parsed once into a map of field name → JSON text, so that every field can be
checked on its own and every unknown field is kept. Pure DataFrame transforms, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_audit.kinds import SUBSCRIPTION_TYPES
from pulsar_audit.schemas import TRACE_COLUMNAR

FORMAT_CHECK = "trace_format"
REQUIRED = ("run_id", "topic", "role", "client", "event", "ts")
EVENTS = {
    "producer": ("send", "ack", "nack"),
    "consumer": ("subscribe", "receive", "end"),
    "run": ("config", "chaos"),
}
ROLE_TABLE = {"producer": "producer_events", "consumer": "consumer_events", "run": "run_events"}
SEQ_EVENTS = ("send", "ack", "nack", "receive")

# Typed optional fields per role: name → ("long" | "int" | "bool" | "string").
OPTIONAL = {
    "producer": {
        "partition": "int",
        "event_index": "long",
        "seq": "long",
        "ledger_id": "long",
        "entry_id": "long",
        "batch_index": "int",
        "error": "string",
        "key": "string",
        "ordering_key": "string",
    },
    "consumer": {
        "partition": "int",
        "event_index": "long",
        "seq": "long",
        "ledger_id": "long",
        "entry_id": "long",
        "batch_index": "int",
        "subscription": "string",
        "producer": "string",
        "redelivery_count": "int",
        "subscription_type": "string",
        "key": "string",
        "ordering_key": "string",
    },
    "run": {
        "event_index": "long",
        "ensemble_size": "int",
        "write_quorum": "int",
        "ack_quorum": "int",
        "brokers": "int",
        "bookies": "int",
        "deduplication": "bool",
        "scenario": "string",
        "action": "string",
        "target": "string",
    },
}
_EXTRA = T.MapType(T.StringType(), T.StringType())
_TYPES = {"long": T.LongType(), "int": T.IntegerType(), "bool": T.BooleanType()}
ALL_OPTIONAL = {name: kind for fields in OPTIONAL.values() for name, kind in fields.items()}

_INTEGER = {"long": r"^-?[0-9]{1,18}$", "int": r"^-?[0-9]{1,9}$"}
_RFC3339 = r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:\d{2})$"
# JSON numbers with a fraction reach us as Jackson renders doubles (1.7410833301015E12).
_EPOCH_MS = r"^[0-9]{1,16}(\.[0-9]{1,17})?([eE][+]?[0-9]{1,2})?$"


def _text(name: str) -> Column:
    """The text of a non-string field, looked up once in the parsed map (see parse_records)."""
    return F.col(f"_t_{name}")


def _is_text(name: str) -> bool:
    """Whether a field is kept as written (a string), i.e. has no typed form of its own."""
    return name in REQUIRED and name != "ts" or ALL_OPTIONAL.get(name) == "string"


def parse_ts(text: Column) -> Column:
    """RFC 3339 with an offset (or Z), or epoch milliseconds (fraction allowed) → timestamp."""
    # try_cast: a number too big for a timestamp (1e99) is refused with a reason, not a failure
    epoch_micros = F.round(text.try_cast(T.DecimalType(24, 6)) * 1000).try_cast(T.LongType())
    return F.when(text.rlike(_EPOCH_MS), F.timestamp_micros(epoch_micros)).when(
        text.rlike(_RFC3339), F.upper(text).try_cast(T.TimestampType())
    )


def _typed(text: Column, kind: str) -> Column:
    if kind in _INTEGER:
        target = T.LongType() if kind == "long" else T.IntegerType()
        return F.when(text.rlike(_INTEGER[kind]), text.cast(target)).cast(target)
    if kind == "bool":
        return F.when(text == "true", True).when(text == "false", False).cast(T.BooleanType())
    return text


def _roles_knowing(name: str) -> list[str]:
    return [role for role, fields in OPTIONAL.items() if name in fields]


def _is_known_field(key: Column) -> Column:
    """Whether `key` is a documented field for this record's role (else it goes to `extra`)."""
    known = key.isin(*REQUIRED)
    for role, fields in OPTIONAL.items():
        known = known | ((F.col("role") == role) & key.isin(*fields))
    return known


def _json_checks() -> list[tuple[Column, Column]]:
    """(refused when, reason text) for every rule of the JSON form, on the typed columns.

    Each condition is a cheap test of columns computed once; the text is built only for the
    rows that fail (see _reasons).
    """
    parsed = F.col("_fields").isNotNull()

    def written(name: str) -> Column:
        return F.col(name) if _is_text(name) else _text(name)

    def type_error(name: str, kind: str) -> tuple[Column, Column]:
        expected = {"long": "an integer", "int": "an integer", "bool": "true or false"}[kind]
        return (
            F.col("role").isin(*_roles_knowing(name))
            & written(name).isNotNull()
            & F.col(name).isNull(),
            F.format_string(f"field '{name}' must be {expected}, got %s", _text(name)),
        )

    seq_text = _text("seq")
    return [
        (~parsed, F.lit("invalid JSON: expected one JSON object per line")),
        (
            # the map keeps a repeated key as often as it is written, so the keys are compared
            # with themselves
            parsed & (F.size(F.array_distinct("_keys")) < F.size("_keys")),
            F.format_string(
                "field '%s' appears more than once: expected each field once",
                F.array_join(_repeated(F.col("_keys")), "', '"),
            ),
        ),
        *_record_checks(parsed, written),
        (
            _text("ts").isNotNull() & F.col("ts").isNull(),
            F.format_string(
                "unparseable ts '%s': expected RFC 3339 with an offset or epoch milliseconds",
                _text("ts"),
            ),
        ),
        _seq_missing(written),
        (
            # a non-negative integer: the typed form exists and the text has no sign
            seq_text.isNotNull() & (F.col("seq").isNull() | seq_text.startswith("-")),
            F.format_string("field 'seq' must be an integer >= 0, got %s", seq_text),
        ),
        *[
            type_error(name, kind)
            for name, kind in ALL_OPTIONAL.items()
            if name != "seq" and kind != "string"
        ],
    ]


def _record_checks(
    parsed: Column, written: Callable[[str], Column], col: Callable[[str], Column] = F.col
) -> list[tuple[Column, Column]]:
    """The rules both forms share: required fields, a known role and event.

    parsed: whether the record could be read at all; written(name): the field as given;
    col(name): the field's typed column.
    """
    role = col("role")
    role_known = role.isin(*EVENTS)
    event = col("event")
    event_known = F.lit(False)
    for role_name, events in EVENTS.items():
        event_known = event_known | ((role == role_name) & event.isin(*events))
    return [
        *[
            (parsed & written(name).isNull(), F.lit(f"missing required field '{name}'"))
            for name in REQUIRED
        ],
        (
            role.isNotNull() & ~role_known,
            F.format_string("unknown role '%s' (expected producer, consumer or run)", role),
        ),
        (
            role_known & event.isNotNull() & ~event_known,
            F.format_string("unknown event '%s' for role '%s'", event, role),
        ),
        (
            (role == "consumer")
            & col("subscription_type").isNotNull()
            & ~col("subscription_type").isin(*SUBSCRIPTION_TYPES),
            F.format_string(
                f"unknown subscription_type '%s' (expected {', '.join(SUBSCRIPTION_TYPES)})",
                col("subscription_type"),
            ),
        ),
    ]


def _seq_missing(
    written: Callable[[str], Column], col: Callable[[str], Column] = F.col
) -> tuple[Column, Column]:
    event = col("event")
    return (
        event.isin(*SEQ_EVENTS) & written("seq").isNull(),
        F.format_string("missing required field 'seq' on a %s event", event),
    )


def _columnar_checks(col: Callable[[str], Column] = F.col) -> list[tuple[Column, Column]]:
    """The rules of the columnar form: its types are the file's own (checked per file), so
    only what a type cannot say is checked per row. col(name): the field's typed column."""
    seq = col("seq")
    return [
        *_record_checks(F.lit(True), col, col),
        _seq_missing(col, col),
        (
            seq.isNotNull() & (seq < 0),
            F.format_string("field 'seq' must be an integer >= 0, got %s", seq),
        ),
    ]


def _reasons(checks: list[tuple[Column, Column]]) -> Column:
    """Every reason the record is refused, joined by '; ' (null when it is accepted)."""
    refused = F.lit(False)
    for when, _ in checks:
        refused = refused | F.coalesce(when, F.lit(False))
    # concat_ws skips the nulls: only the failed checks' texts are joined
    text = F.concat_ws("; ", *[F.when(when, reason) for when, reason in checks])
    return F.when(refused, text)


def _repeated(keys: Column) -> Column:
    """The keys that occur more than once in the array `keys`."""
    return F.array_distinct(
        F.filter(keys, lambda k: F.size(F.array_remove(keys, k)) < F.size(keys) - 1)
    )


def _extra(known_present: Column) -> Column:
    """The fields not documented for the record's role, as written (an empty map if none).

    `known_present` counts the documented fields the record has with a value: when it is
    the map's size, nothing else is there and the per-key filter is skipped.
    """
    unknown = F.map_filter(F.col("_fields"), lambda k, _: ~_is_known_field(k))
    none = F.create_map().cast(_EXTRA)
    return F.when(F.size("_fields") > known_present, unknown).otherwise(none)


def parse_records(
    lines: DataFrame,
    position: tuple[str, ...] = ("source_file", "line_number"),
    typed_first: bool = True,
) -> DataFrame:
    """Lines (`position` columns, value) → one row per line with typed fields, `reason`
    (null when accepted) and `_blank` (a blank line is not a record: no fields, no reason).

    position: the columns that say where the line is, carried through unchanged.
    typed_first: whether lines are read as below; False: every line goes through the text
    parse, whose plan is smaller (less to plan for a small input) and which costs more per
    line.

    With `typed_first`, each line is first parsed straight into its typed fields (`from_json`
    to a struct). A record that passes every rule that way — a JSON object whose every key is
    a documented field of its role, given once and typed without loss, within the integer
    sizes the text rules allow, and every record rule satisfied — is taken as parsed (nothing
    in `extra`, no reason). Every other record goes through the text parse
    (`_parse_as_text`), which finds each of its reasons and keeps its unknown fields; that
    parse is evaluated only for those records. Both give the same row for any line
    (tests/ingest/test_trace_typed_parse.py).

    Materialize the result before filtering on its columns (the ingest checkpoints its staged
    rows): Spark pushes a filter down through projections by substituting each column's
    expression, and here that would copy both parses into the condition many times over.
    """
    if not typed_first:
        rows = _lines(lines, position, F.lit(False).alias("_clean"))
        return _parse_as_text(rows, (*position, "_clean")).drop("_clean")
    checked = read_typed(lines, position)
    names = [*REQUIRED, *ALL_OPTIONAL]
    fast = [f"_f_{n}" for n in names]
    slow = _parse_as_text(checked, (*position, "_clean", *fast))
    clean = F.col("_clean")
    return slow.select(
        *position,
        "raw",
        "_blank",
        *[F.when(clean, F.col(f"_f_{n}")).otherwise(F.col(n)).alias(n) for n in names],
        F.when(clean, F.create_map().cast(_EXTRA)).otherwise(F.col("extra")).alias("extra"),
        "reason",
    )


def _lines(lines: DataFrame, position: tuple[str, ...], *more: Column) -> DataFrame:
    """Each line's `position`, `raw` (the text), `_blank` and `_keys` (every top-level key as
    written, a repeated one as often as it is written), and the columns `more`."""
    blank = F.trim(F.col("value")) == ""
    return lines.select(
        *position,
        F.col("value").alias("raw"),
        blank.alias("_blank"),
        F.when(~blank, F.json_object_keys("value")).alias("_keys"),
        *more,
    )


def read_typed(lines: DataFrame, position: tuple[str, ...]) -> DataFrame:
    """parse_records' first read: each line's fields typed as `_f_<name>` (`_f_ts_text`: the
    ts as written), `raw`, `_blank`, `_keys`, and `_clean`: whether that read is the whole
    answer for the record (see parse_records)."""
    blank = F.trim(F.col("value")) == ""
    parsed = _lines(lines, position, F.when(~blank, F.from_json("value", _TYPED)).alias("_typed"))
    names = [*REQUIRED, *ALL_OPTIONAL]
    typed = F.col("_typed")
    # the typed fields are named _f_<name> from the start: renaming them in a later projection
    # makes Spark's constraint propagation try every combination of old and new names
    fast = [f"_f_{n}" for n in names]
    read = parsed.select(
        *position,
        "raw",
        "_blank",
        "_keys",
        *[typed.getField(n).alias(f"_f_{n}") for n in names if n != "ts"],
        typed.getField("ts").alias("_f_ts_text"),
        parse_ts(typed.getField("ts")).alias("_f_ts"),
    )
    return read.select(
        *position, "raw", "_blank", "_keys", *fast, _typed_clean(names).alias("_clean")
    )


# Each field as the typed parse reads it; `ts` as text (its two forms are read by parse_ts).
_TYPED = T.StructType(
    [
        T.StructField(name, T.StringType() if _is_text(name) or name == "ts" else _TYPES[kind])
        for name, kind in [*((n, "string") for n in REQUIRED), *ALL_OPTIONAL.items()]
    ]
)
# The largest magnitude the text rules accept for each integer kind (_INTEGER's digits).
_INTEGER_BOUND = {"long": 10**18 - 1, "int": 10**9 - 1}


def _typed_clean(names: list[str]) -> Column:
    """Whether the typed parse of a record is the whole answer (see parse_records): it is a
    JSON object, every key is a documented field of its role with a typed value, and no rule
    refuses it. False (never null) otherwise."""

    def col(name: str) -> Column:
        return F.col(f"_f_{name}")

    role = col("role")
    present = F.lit(0)
    for name in names:
        has = (F.col("_f_ts_text") if name == "ts" else col(name)).isNotNull()
        if name not in REQUIRED:
            has = has & F.coalesce(role.isin(*_roles_knowing(name)), F.lit(False))
        present = present + has.cast("int")
    clean = F.col("_keys").isNotNull() & (F.size("_keys") == present)
    for name, kind in ALL_OPTIONAL.items():
        if kind in _INTEGER_BOUND:
            bound = _INTEGER_BOUND[kind]  # abs() of the smallest value would overflow
            clean = clean & F.coalesce(col(name).between(-bound, bound), F.lit(True))
    for when, _ in _columnar_checks(col):
        clean = clean & ~F.coalesce(when, F.lit(False))
    return F.coalesce(clean, F.lit(False))


def _parse_as_text(rows: DataFrame, position: tuple[str, ...]) -> DataFrame:
    """The text parse of the records that are not `_clean` (`raw` is the line): each line
    parsed once into a map of field name → JSON text, each field looked up in it once, typed
    once and checked on its typed form, in projections that Spark keeps apart (a column used
    twice is computed once). Rows that are `_clean` or blank get nulls, at little cost."""
    parsed = rows.select(
        *position,
        "raw",
        "_blank",
        F.when(
            ~F.col("_blank") & ~F.col("_clean"),
            F.from_json("raw", T.MapType(T.StringType(), T.StringType())),
        ).alias("_fields"),
        "_keys",
    )
    names = [*REQUIRED, *ALL_OPTIONAL]
    fields = F.col("_fields")
    texts = parsed.select(
        *position,
        "raw",
        "_blank",
        "_fields",
        "_keys",
        *[fields.getItem(n).alias(n if _is_text(n) else f"_t_{n}") for n in names],
    )
    typed = texts.select(
        "*",
        parse_ts(_text("ts")).alias("ts"),
        *[_typed(_text(n), k).alias(n) for n, k in ALL_OPTIONAL.items() if not _is_text(n)],
    )
    known_present = F.lit(0)
    for name in names:
        has = (F.col(name) if _is_text(name) else _text(name)).isNotNull()
        if name not in REQUIRED:
            has = has & F.coalesce(F.col("role").isin(*_roles_knowing(name)), F.lit(False))
        known_present = known_present + has.cast("int")
    return typed.select(
        *position,
        "raw",
        "_blank",
        *names,
        F.when(fields.isNotNull(), _extra(known_present)).alias("extra"),
        F.when(~F.col("_blank") & ~F.col("_clean"), _reasons(_json_checks())).alias("reason"),
    )


def parse_columnar(
    rows: DataFrame, position: tuple[str, ...] = ("source_file", "line_number")
) -> DataFrame:
    """Rows of the columnar form (`position` columns plus TRACE_COLUMNAR's) → what
    `parse_records` gives for the same records: typed fields, `extra`, `reason`, `_blank`.

    The types are the file's (checked per file by `columnar_problems`); each row is checked
    for what a type cannot say. `raw` is the row as read, a struct: the source makes it the JSON
    object quarantine keeps for the rows that go there only (ingest/traces.py `raw_text`; a
    JSON text for every row was most of this parse's cost: session 42).
    """
    return rows.select(
        *position,
        F.struct(*TRACE_COLUMNAR.names).alias("raw"),
        F.lit(False).alias("_blank"),
        *REQUIRED,
        *ALL_OPTIONAL,
        F.coalesce("extra", F.create_map().cast(_EXTRA)).alias("extra"),
        _reasons(_columnar_checks()).alias("reason"),
    )


def columnar_problems(schema: T.StructType) -> list[str]:
    """What keeps a file with `schema` from being the columnar form (empty: nothing)."""
    expected = {f.name: f.dataType.simpleString() for f in TRACE_COLUMNAR}
    problems = []
    names = [f.name.lower() for f in schema]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"column '{name}' appears {names.count(name)} times (case aside)")
    for field in schema:
        found = field.dataType.simpleString()
        if field.name not in expected:
            problems.append(
                f"unknown column '{field.name}' ({found}): expected only the fields of trace "
                "format v1, others as text in the map column 'extra'"
            )
        elif found != expected[field.name]:
            problems.append(f"column '{field.name}' is {found}, expected {expected[field.name]}")
    return problems


def to_columnar(records: DataFrame) -> DataFrame:
    """Accepted records (parse_records' rows with no reason) → rows of the columnar form."""
    extra = F.col("extra")
    return records.select(
        *[
            F.col(f.name).cast(f.dataType)
            if f.name != "extra"
            else F.when(F.size(extra) > 0, extra).alias("extra")
            for f in TRACE_COLUMNAR
        ]
    )


def target_table(role: Column) -> Column:
    """The bronze table a record of `role` belongs to ('trace' when the role is unknown)."""
    table = F.lit("trace")
    for role_name, name in ROLE_TABLE.items():
        table = F.when(role == role_name, F.lit(name)).otherwise(table)
    return table


def with_defaults(records: DataFrame) -> DataFrame:
    """Fill the documented defaults: partition −1, batch_index −1, redelivery_count 0."""
    return records.withColumns(
        {
            "partition": F.coalesce("partition", F.lit(-1)),
            "batch_index": F.when(
                F.col("ledger_id").isNotNull(), F.coalesce("batch_index", F.lit(-1))
            ).otherwise(F.col("batch_index")),
            "redelivery_count": F.when(
                F.col("event") == "receive", F.coalesce("redelivery_count", F.lit(0))
            ).otherwise(F.col("redelivery_count")),
        }
    )
