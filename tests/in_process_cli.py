"""`pulsar-audit ARGS…` through the CLI's entry point in the tests' own process.

The command gets the tests' Spark session (no JVM start, which costs a child process 10-20 s
of the suite's two shared cores); what it prints is captured. A command builds its session
from its config, and a builder applied to a running session sets its SQL settings there: the
modifiable ones are put back afterwards, so the next test runs with the tests' settings
(spark_test_conf.py).
"""

from __future__ import annotations

import contextlib
import io

from pyspark.sql import SparkSession

from jobs.cli import main


def cli_in_process(spark: SparkSession, *argv: str) -> tuple[int, str, str]:
    """Run the command line `argv` in this process: (exit code, stdout, stderr)."""
    before = dict(spark.conf.getAll)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        after = dict(spark.conf.getAll)
        changed = [k for k in before.keys() | after.keys() if before.get(k) != after.get(k)]
        for key in filter(spark.conf.isModifiable, changed):
            if key in before:
                spark.conf.set(key, before[key])
            else:
                spark.conf.unset(key)
    return code, out.getvalue(), err.getvalue()
