"""A quiet, in-memory Great Expectations context that validates Spark DataFrames."""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import great_expectations as gx
import pandas as pd
from great_expectations.data_context.types.base import ProgressBarsConfig
from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Outcome:
    """What GX said of one expectation."""

    name: str
    expectation: str
    column: str | None
    success: bool
    unexpected_count: int | None
    observed_value: Any
    unexpected_index: list[dict[str, Any]]


# The warm-up thread (checks/warm.py) may still be building the context when a job's first
# validation asks for it: that caller waits for the build instead of making a second one.
_CONTEXT_LOCK = threading.Lock()


def _context() -> Any:
    """The process's one GX context, built on first use."""
    with _CONTEXT_LOCK:
        return _built_context()


@lru_cache(maxsize=1)
def _built_context() -> Any:
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("great_expectations"):
            logging.getLogger(name).setLevel(logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def warm_up() -> None:
    """Build the context now (importing GX and making its context take seconds): for a job
    to run in a thread while the JVM starts. A failure here is raised again by `validate`
    (a failed build is not cached)."""
    with contextlib.suppress(Exception):  # the first real validation reports it
        _context()


def validate(
    df: DataFrame | pd.DataFrame,
    suite_name: str,
    expectations: list[Any],
    index_columns: list[str] | None = None,
) -> list[Outcome]:
    """Validate `df` against `expectations`; each expectation names itself in meta["rule"].

    A pandas frame is the small per-run frame of counts a check aggregated in Spark (judged
    in-process, no Spark job); a Spark frame is scanned by GX itself.
    index_columns: with these, failing rows are listed by them (use only on small frames).
    """
    context = _context()
    if isinstance(df, pd.DataFrame):
        source = context.data_sources.add_or_update_pandas(f"pandas_{suite_name}")
    else:
        source = context.data_sources.add_or_update_spark(f"spark_{suite_name}")
    asset = source.add_dataframe_asset(suite_name)
    batch = asset.add_batch_definition_whole_dataframe("whole").get_batch(
        batch_parameters={"dataframe": df}
    )
    suite = gx.ExpectationSuite(name=suite_name, expectations=expectations)
    result_format: dict[str, Any] = {"result_format": "SUMMARY"}
    if index_columns:
        result_format = {
            "result_format": "COMPLETE",
            "unexpected_index_column_names": index_columns,
        }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = batch.validate(suite, result_format=result_format)
    outcomes = []
    for item in result.results:
        config = item.expectation_config
        kwargs = config.kwargs
        outcomes.append(
            Outcome(
                name=(config.meta or {}).get("rule", config.type),
                expectation=config.type,
                column=kwargs.get("column") or kwargs.get("column_A"),
                success=bool(item.success),
                unexpected_count=item.result.get("unexpected_count"),
                observed_value=item.result.get("observed_value"),
                unexpected_index=list(item.result.get("unexpected_index_list") or []),
            )
        )
        if item.exception_info and item.exception_info.get("raised_exception"):
            raise RuntimeError(
                f"GX could not evaluate {config.type} on {suite_name}: "
                f"{item.exception_info.get('exception_message')}"
            )
    return outcomes
