"""`pulsar-audit sql`: run a query with every table named by its layer (`gold.anomalies`)."""

from __future__ import annotations

from typing import Any

from pyspark.errors import PySparkException

from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.schemas import TABLES


def register_tables(lakehouse: Lakehouse) -> list[str]:
    """Make `layer.table` name every contract table in this session; return the names.

    Local storage: each layer becomes a session database holding the Delta paths as external
    tables (the session catalog is in memory: nothing outlives the process). A catalog
    (Databricks) names tables `catalog.schema.table`; those names are used as they are.
    """
    spark = lakehouse.spark
    app = spark.sparkContext.applicationId
    names = []
    for name, spec in TABLES.items():
        lakehouse.create(name)
        if lakehouse.config.storage != "path":
            names.append(lakehouse.location(name))
            continue
        qualified, location = f"{spec.layer}.{spec.name}", lakehouse.location(name)
        names.append(qualified)
        # A warm session (the server, the shell) registered it for an earlier query: the
        # table reads its latest version at every query, only the name is kept.
        if _REGISTERED.get((app, qualified)) == location and spark.catalog.tableExists(qualified):
            continue
        spark.sql("CREATE DATABASE IF NOT EXISTS IDENTIFIER(:db)", args={"db": spec.layer})
        spark.sql("DROP TABLE IF EXISTS IDENTIFIER(:t)", args={"t": qualified})
        spark.catalog.createTable(qualified, path=location, source="delta")
        _REGISTERED[(app, qualified)] = location
    return names


# (Spark application, layer.table) -> the Delta path the session's catalog names by it
_REGISTERED: dict[tuple[str, str], str] = {}


def run_sql(lakehouse: Lakehouse, query: str, limit: int) -> dict[str, Any]:
    """{"columns", "rows", "truncated"}: at most `limit` rows of the query's result.

    A query Spark refuses or fails is an InputError with Spark's one-line message (its error
    class, what is wrong, its hint: "Did you mean …"), without the plan or the Java stack."""
    register_tables(lakehouse)
    try:
        result = lakehouse.spark.sql(query)
        rows = [r.asDict(recursive=True) for r in result.limit(limit + 1).collect()]
    except PySparkException as exc:
        raise InputError(f"the query cannot run: {one_line(exc)}") from None
    return {"columns": result.columns, "rows": rows[:limit], "truncated": len(rows) > limit}


def one_line(exc: PySparkException) -> str:
    """Spark's message of `exc` up to its first line break (the plan and the stack follow)."""
    message = str(exc).strip()
    return message.splitlines()[0] if message else type(exc).__name__
