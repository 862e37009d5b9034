"""What the libraries print that a user of pulsar-audit did not ask for, hidden unless -v.

- The JVM's start: Spark's launcher gives every driver JVM `--add-modules=jdk.incubator.vector`
  (spark-launcher's JavaModuleOptions, not an option of ours), so the JVM warns "Using
  incubator modules"; Spark then prints its default log level. Both go to the stderr the JVM
  inherits, so that stderr is a pipe while the JVM starts: those lines are dropped, every other
  line (a real error, later) is passed on as it comes.
- PySpark's JSON log of a failed query (its whole Java stack): the error is raised anyway.
- MLflow's INFO and WARNING lines, GX's warnings and both libraries' Python warnings.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# The lines the JVM and Spark print at every start, by how they begin.
JVM_START_LINES = (
    b"WARNING: Using incubator modules:",
    b'Setting default log level to "',
    b"To adjust logging level use sc.setLogLevel(",
)
PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
LIBRARY_MODULES = r"(mlflow|great_expectations|alembic)(\.|$)"


def verbose() -> bool:
    """Whether -v was given (the command line then logs INFO)."""
    return logging.getLogger().isEnabledFor(logging.INFO)


def quiet_libraries(is_verbose: bool) -> None:
    """MLflow and GX say only errors unless -v (MLflow reads its level when imported)."""
    logging.getLogger("great_expectations").setLevel(
        logging.WARNING if is_verbose else logging.ERROR
    )
    if not is_verbose:
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "ERROR")
        warnings.filterwarnings("ignore", module=LIBRARY_MODULES)


def quiet_pyspark_errors() -> None:
    """PySpark logs a failed query with its Java stack before raising it: not unless -v."""
    if verbose():
        return
    from pyspark.logger import PySparkLogger

    for name in PYSPARK_ERROR_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def _forward(source: int, target: int, drop: tuple[bytes, ...]) -> None:
    with os.fdopen(source, "rb") as lines:
        for line in iter(lines.readline, b""):
            if not line.startswith(drop):
                os.write(target, line)


@contextmanager
def jvm_start_quiet(drop: tuple[bytes, ...] = JVM_START_LINES) -> Iterator[None]:
    """While inside, processes started get a stderr that leaves out the lines starting with
    `drop` (for the whole of their life); this process's stderr is its own again after."""
    if verbose():
        yield
        return
    sys.stderr.flush()
    terminal = os.dup(2)  # kept open: the JVM's lines go on to it while the JVM lives
    read_end, write_end = os.pipe()
    forward = threading.Thread(
        target=_forward, args=(read_end, terminal, drop), name="jvm-stderr", daemon=True
    )
    forward.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)  # the pipe's last writer is now the JVM
