"""Trace lines as the tests read and parse them (the product reads them in batches:
ingest/files.py:read_lines, ingest/trace_format.py:parse_records)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.files import read_lines
from ingest.trace_format import parse_records


def read_numbered_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """One row per line of `paths` (URIs or local paths): source_file, line_number, value."""
    return read_lines(spark, paths).lines


def parse_lines(lines: DataFrame) -> DataFrame:
    """Lines (source_file, line_number, value) → one row per record with typed fields and
    `reason`; blank lines are not records and are left out.

    Computed once, as the ingest does (its staged rows are checkpointed): a filter on the
    parse's columns pushed down into its projections would copy the parse into the filter's
    condition (see parse_records)."""
    return parse_records(lines).filter(~F.col("_blank")).drop("_blank").localCheckpoint()
