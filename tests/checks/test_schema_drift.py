"""The table-level `schema` check fails on a table written by another version of the contract."""

from __future__ import annotations

from datetime import datetime

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


def test_a_table_from_before_v1_1_reads_as_the_contract_and_gains_its_columns(lakehouse):
    """A consumer_events table written before trace format v1.1 (no subscription_type, key,
    ordering_key): read with those columns null, it passes the schema check; the next write
    adds them (schema auto-merge), and its old rows keep null."""
    from pyspark.sql import functions as F

    contract = TABLES["consumer_events"].schema
    added = ("subscription_type", "key", "ordering_key")
    older = T.StructType([f for f in contract.fields if f.name not in added])
    row = {f.name: None for f in older.fields}
    row.update(run_id="r0", topic="t", partition=-1, client="c", event="end", line_number=1)
    row.update(source_file="old.jsonl", ingest_id="i0")
    row.update(ts=datetime(2026, 1, 1), ingested_at=datetime(2026, 1, 1))
    spark = lakehouse.spark
    old = spark.createDataFrame([tuple(row[f.name] for f in older.fields)], older)
    old.write.format("delta").save(lakehouse.location("consumer_events"))

    read = lakehouse.read("consumer_events")
    assert [read.schema[c].dataType for c in added] == [T.StringType()] * 3
    assert check_schemas({"consumer_events": read}) == {"consumer_events": True}

    new = read.withColumn("run_id", F.lit("r1")).withColumn("key", F.lit("k"))
    lakehouse.append("consumer_events", new)
    stored = spark.read.format("delta").load(lakehouse.location("consumer_events"))
    assert set(added) <= set(stored.columns)
    keys = {r.run_id: r.key for r in stored.select("run_id", "key").collect()}
    assert keys == {"r0": None, "r1": "k"}
