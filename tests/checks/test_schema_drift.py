"""The table-level `schema` check fails on a table written by another version of the contract."""

from __future__ import annotations

from pyspark.sql import types as T

from checks.tables import check_schemas, schema_drift
from pulsar_audit.schemas import TABLES

CONTRACT = TABLES["run_events"].schema


def test_the_contract_has_no_drift():
    assert schema_drift(CONTRACT, CONTRACT) == []


def test_drift_names_missing_extra_and_retyped_columns():
    older = T.StructType(
        [
            T.StructField(f.name, T.StringType() if f.name == "ts" else f.dataType)
            for f in CONTRACT.fields
            if f.name != "ingest_id"
        ]
        + [T.StructField("legacy", T.StringType())]
    )
    assert schema_drift(older, CONTRACT) == [
        "missing ingest_id",
        "extra legacy",
        "ts is string, not timestamp",
    ]


def test_an_older_table_fails_the_schema_check(spark):
    retyped = T.StructType(
        [
            T.StructField(f.name, T.StringType() if f.name == "ts" else f.dataType)
            for f in CONTRACT.fields
        ]
    )
    tables = {
        "run_events": spark.createDataFrame([], retyped),
        "producer_events": spark.createDataFrame([], TABLES["producer_events"].schema),
    }
    assert check_schemas(tables) == {"run_events": False, "producer_events": True}
