"""Trace format v1 (docs/trace-format.md): parse JSON lines into typed events, or a reason why not.

Each line is parsed once into a map of field name → JSON text, so that every field can be
checked on its own and every unknown field is kept. Pure DataFrame transforms, no I/O.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

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
ALL_OPTIONAL = {name: kind for fields in OPTIONAL.values() for name, kind in fields.items()}

_INTEGER = {"long": r"^-?[0-9]{1,18}$", "int": r"^-?[0-9]{1,9}$"}
_RFC3339 = r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?([Zz]|[+-]\d{2}:\d{2})$"
# JSON numbers with a fraction reach us as Jackson renders doubles (1.7410833301015E12).
_EPOCH_MS = r"^[0-9]{1,16}(\.[0-9]{1,17})?([eE][+]?[0-9]{1,2})?$"


def _text(name: str) -> Column:
    return F.col("_fields").getItem(name)


def parse_ts(text: Column) -> Column:
    """RFC 3339 with an offset (or Z), or epoch milliseconds (fraction allowed) → timestamp."""
    # try_cast: a number too big for a timestamp (1e99) is refused with a reason, not a failure
    epoch_micros = F.round(text.try_cast(T.DecimalType(24, 6)) * 1000).try_cast(T.LongType())
    return F.when(text.rlike(_EPOCH_MS), F.timestamp_micros(epoch_micros)).when(
        text.rlike(_RFC3339), F.upper(text).try_cast(T.TimestampType())
    )


def _typed(name: str, kind: str) -> Column:
    text = _text(name)
    if kind in _INTEGER:
        target = T.LongType() if kind == "long" else T.IntegerType()
        return F.when(text.rlike(_INTEGER[kind]), text.cast(target)).cast(target)
    if kind == "bool":
        return F.when(text == "true", True).when(text == "false", False).cast(T.BooleanType())
    return text


def _roles_knowing(name: str) -> list[str]:
    return [role for role, fields in OPTIONAL.items() if name in fields]


def _type_error(name: str, kind: str) -> Column:
    """Reason text when `name`, a field of this record's role, is not of `kind` (else null)."""
    text = _text(name)
    expected = {"long": "an integer", "int": "an integer", "bool": "true or false"}[kind]
    return F.when(
        F.col("role").isin(*_roles_knowing(name)) & text.isNotNull() & _typed(name, kind).isNull(),
        F.format_string(f"field '{name}' must be {expected}, got %s", text),
    )


def _is_known_field(key: Column) -> Column:
    """Whether `key` is a documented field for this record's role (else it goes to `extra`)."""
    known = key.isin(*REQUIRED)
    for role, fields in OPTIONAL.items():
        known = known | ((F.col("role") == role) & key.isin(*fields))
    return known


def _reasons() -> Column:
    """Every reason the record is refused, joined by '; ' (null when it is accepted)."""
    role_known = F.col("role").isin(*EVENTS)
    event = F.col("event")
    event_known = F.lit(False)
    for role, events in EVENTS.items():
        event_known = event_known | ((F.col("role") == role) & event.isin(*events))
    seq_text = _text("seq")
    checks = [
        F.when(F.col("_fields").isNull(), F.lit("invalid JSON: expected one JSON object per line")),
        F.when(
            F.col("_fields").isNotNull() & (F.size("_keys") > F.size(F.map_keys("_fields"))),
            F.format_string(
                "field '%s' appears more than once: expected each field once",
                F.array_join(_repeated(F.col("_keys")), "', '"),
            ),
        ),
        *[
            F.when(
                F.col("_fields").isNotNull() & _text(name).isNull(),
                F.lit(f"missing required field '{name}'"),
            )
            for name in REQUIRED
        ],
        F.when(
            F.col("role").isNotNull() & ~role_known,
            F.format_string(
                "unknown role '%s' (expected producer, consumer or run)", F.col("role")
            ),
        ),
        F.when(
            role_known & event.isNotNull() & ~event_known,
            F.format_string("unknown event '%s' for role '%s'", event, F.col("role")),
        ),
        F.when(
            _text("ts").isNotNull() & parse_ts(_text("ts")).isNull(),
            F.format_string(
                "unparseable ts '%s': expected RFC 3339 with an offset or epoch milliseconds",
                _text("ts"),
            ),
        ),
        F.when(
            event.isin(*SEQ_EVENTS) & seq_text.isNull(),
            F.format_string("missing required field 'seq' on a %s event", event),
        ),
        F.when(
            seq_text.isNotNull() & ~seq_text.rlike(r"^[0-9]{1,18}$"),
            F.format_string("field 'seq' must be an integer >= 0, got %s", seq_text),
        ),
        *[
            _type_error(name, kind)
            for name, kind in ALL_OPTIONAL.items()
            if name != "seq" and kind != "string"
        ],
    ]
    return F.nullif(F.concat_ws("; ", F.array_compact(F.array(*checks))), F.lit(""))


def _repeated(keys: Column) -> Column:
    """The keys that occur more than once in the array `keys`."""
    return F.array_distinct(
        F.filter(keys, lambda k: F.size(F.array_remove(keys, k)) < F.size(keys) - 1)
    )


def parse_records(
    lines: DataFrame, position: tuple[str, ...] = ("source_file", "line_number")
) -> DataFrame:
    """Lines (`position` columns, value) → one row per line with typed fields, `reason`
    (null when accepted) and `_blank` (a blank line is not a record: no fields, no reason).

    position: the columns that say where the line is, carried through unchanged.
    """
    blank = F.trim(F.col("value")) == ""
    parsed = lines.select(
        *position,
        F.col("value").alias("raw"),
        blank.alias("_blank"),
        F.when(~blank, F.from_json("value", T.MapType(T.StringType(), T.StringType()))).alias(
            "_fields"
        ),
        # every top-level key as written (a repeated one is kept once by the map above)
        F.when(~blank, F.json_object_keys("value")).alias("_keys"),
    )
    return (
        parsed.select(
            *position,
            "raw",
            "_blank",
            "_fields",
            "_keys",
            *[_text(name).alias(name) for name in REQUIRED if name != "ts"],
            parse_ts(_text("ts")).alias("ts"),
            *[_typed(name, kind).alias(name) for name, kind in ALL_OPTIONAL.items()],
        )
        .select(
            "*",
            F.map_filter(F.col("_fields"), lambda k, _: ~_is_known_field(k)).alias("extra"),
            F.when(~F.col("_blank"), _reasons()).alias("reason"),
        )
        .drop("_fields", "_keys")
    )


def parse_lines(lines: DataFrame) -> DataFrame:
    """Lines (source_file, line_number, value) → one row per record with typed fields and `reason`.

    Blank lines are not records and are left out.
    """
    return parse_records(lines).filter(~F.col("_blank")).drop("_blank")


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
