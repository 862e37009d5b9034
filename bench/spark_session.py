"""The local Spark session with Delta that bench scripts use (the product's own `get_spark`)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from pulsar_audit.config import load_config
from pulsar_audit.spark import get_spark


def local_spark(scratch: Path) -> SparkSession:
    """`get_spark` with the embedded local config as the CLI builds it, lakehouse at `scratch`."""
    return get_spark(load_config("local", lakehouse=str(scratch)))
