"""Small DataFrames from rows held in Python, built without Python workers.

`SparkSession.createDataFrame(list, schema)` pickles the rows into an RDD that only a Python
worker can read: every action on such a frame (an empty table read, a run's check results,
a stage's fingerprint) starts Spark's Python daemon and sends each partition through it. In a
small `analyze` that was about an eighth of its CPU (docs/performance.md, "Session 18"). An
Arrow table instead reaches the JVM as one `LocalRelation` that Spark reads itself.

A naive `datetime` is taken as UTC (the sessions' time zone), not as the machine's local time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema


def local_frame(spark: SparkSession, rows: Iterable[Any], schema: T.StructType | str) -> DataFrame:
    """A DataFrame of `rows` (tuples or Rows by position, or mappings by field name) with
    `schema` (a StructType or a DDL string); a null in a non-nullable field is refused."""
    struct = _struct(schema)
    rows = list(rows)
    arrow = to_arrow_schema(struct)
    columns = []
    for index, field in enumerate(struct.fields):
        values = [_plain(_field_of(row, index, field.name), field.dataType) for row in rows]
        if not field.nullable and any(v is None for v in values):
            raise ValueError(f"field {field.name!r} is not nullable but a row holds null")
        columns.append(pa.array(values, type=arrow.field(field.name).type))
    return spark.createDataFrame(pa.Table.from_arrays(columns, schema=arrow), struct)


def _struct(schema: T.StructType | str) -> T.StructType:
    if isinstance(schema, T.StructType):
        return schema
    parsed = T._parse_datatype_string(schema)
    if not isinstance(parsed, T.StructType):
        raise ValueError(f"expected a struct schema, got {schema!r}")
    return parsed


def _field_of(row: Any, index: int, name: str) -> Any:
    if isinstance(row, Mapping):
        return row.get(name)
    return row[index]


def _plain(value: Any, data_type: T.DataType) -> Any:
    """`value` in the shape pyarrow takes for `data_type`: structs as dicts, maps as pairs."""
    if value is None:
        return None
    if isinstance(data_type, T.StructType):
        if isinstance(value, Row):
            value = value.asDict()
        elif not isinstance(value, Mapping):
            value = dict(zip(data_type.names, value, strict=True))
        return {f.name: _plain(value.get(f.name), f.dataType) for f in data_type.fields}
    if isinstance(data_type, T.ArrayType):
        return [_plain(v, data_type.elementType) for v in value]
    if isinstance(data_type, T.MapType):
        items = value.items() if isinstance(value, Mapping) else value
        return [(k, _plain(v, data_type.valueType)) for k, v in items]
    return value


def local_rows(df: DataFrame) -> int | None:
    """How many rows `df` holds when it is a `local_frame`, or a selection of its columns
    (its rows are in its plan: known without a Spark job, the same at every use); None for
    any other frame (one that computes anything: a job would)."""
    plan = df._jdf.queryExecution().analyzed()  # noqa: SLF001
    while plan.getClass().getSimpleName() == "Project":
        columns = plan.projectList()
        named = (columns.apply(i).getClass().getSimpleName() for i in range(columns.size()))
        if any(kind != "AttributeReference" for kind in named):
            return None
        plan = plan.child()
    if plan.getClass().getSimpleName() != "LocalRelation":
        return None
    return int(plan.data().size())
