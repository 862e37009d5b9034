"""Catalog mode (`storage: catalog`, Unity Catalog on Databricks) against Spark's own catalog:
managed Delta tables under the test session's temporary warehouse, every table by its
`catalog.schema.table` name — init, writes (replaceWhere, MERGE), time travel and the whole
main job — give what the path mode gives.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from delta.tables import DeltaTable

from jobs.analyze import analyze
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import TABLES

FIXTURE_TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
GOLD = ("run_summary", "anomalies", "outages")


@pytest.fixture
def catalog_lakehouse(spark) -> Lakehouse:
    """conf/databricks.yaml, pointed at the session catalog with schemas of its own."""
    prefix = f"pa_{uuid.uuid4().hex[:8]}"
    config = load_config("databricks", catalog="spark_catalog", schema_prefix=prefix)
    return Lakehouse(spark, config)


def _warehouse(spark) -> str:
    return spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")


def test_init_creates_every_table_as_a_managed_delta_table_by_name(spark, catalog_lakehouse):
    lakehouse = catalog_lakehouse
    prefix = lakehouse.config.schemas["bronze"].removesuffix("_bronze")
    report = lakehouse.create_all()
    assert len(report) == len(TABLES) and all(r["created"] for r in report)
    assert {r["location"] for r in report} == {
        f"spark_catalog.{prefix}_{spec.layer}.{spec.name}" for spec in TABLES.values()
    }
    assert not any(r["created"] for r in Lakehouse(spark, lakehouse.config).create_all())
    name = lakehouse.location("producer_events")
    detail = DeltaTable.forName(spark, name).detail().first()
    assert detail["format"] == "delta"
    assert detail["location"].removeprefix("file:").startswith(_warehouse(spark))
    assert spark.catalog.getTable(name).tableType == "MANAGED"


def test_writes_merge_and_time_travel_by_table_name(spark, catalog_lakehouse):
    lakehouse = catalog_lakehouse
    lakehouse.record_stage("gold", "first")
    lakehouse.record_stage("gold", "second")  # MERGE on the natural key: still one row
    lakehouse.record_stage("silver", "first")
    state = lakehouse.read("stage_state")
    assert sorted((r["stage"], r["input_fingerprint"]) for r in state.collect()) == [
        ("gold", "second"),
        ("silver", "first"),
    ]
    assert lakehouse.stage_is_current("gold", "second")
    assert not lakehouse.stage_is_current("gold", "first")
    versions = [v for v, _ in lakehouse.commits("stage_state")]
    assert versions == [0, 1, 2, 3]  # create, then one commit per MERGE
    as_of = lakehouse.read("stage_state", version=1)  # time travel by name
    assert [(r["stage"], r["input_fingerprint"]) for r in as_of.collect()] == [("gold", "first")]
    assert lakehouse.versions(["stage_state", "anomalies"]) == {
        "stage_state": 3,
        "anomalies": -1,
    }


def test_the_main_job_gives_the_same_gold_by_name_as_on_paths(spark, catalog_lakehouse, lakehouse):
    by_name = analyze(catalog_lakehouse, catalog_lakehouse.config, str(FIXTURE_TRACES))
    by_path = analyze(lakehouse, lakehouse.config, str(FIXTURE_TRACES))
    assert by_name["ingest"]["files"] == 2 and by_name["runs"]
    assert by_name == by_path
    for table in GOLD:
        by_name_rows, by_path_rows = catalog_lakehouse.read(table), lakehouse.read(table)
        assert by_name_rows.exceptAll(by_path_rows).isEmpty(), table
        assert by_path_rows.exceptAll(by_name_rows).isEmpty(), table
    # a rerun by name finds nothing new (replaceWhere + manifest MERGE worked by name)
    again = analyze(catalog_lakehouse, catalog_lakehouse.config, str(FIXTURE_TRACES))
    assert again["ingest"]["files"] == 0 and again["runs"] == by_name["runs"]
