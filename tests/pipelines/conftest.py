"""Pipeline builds and live folds shared by the tests of a module (its `CASES`, its
`MICRO_BATCHES`) or of the folder (no events)."""

from __future__ import annotations

import pytest
from pipeline_events import Folds, Gold, Runs, build, folded

from pipelines.build import Silver
from pipelines.live_state import Folded, LiveState


@pytest.fixture(scope="module")
def runs(spark, request: pytest.FixtureRequest) -> Runs:
    """The module's `CASES` (pipeline_events.Cases) built as the runs of one pipeline build."""
    return request.module.CASES.build(spark)


@pytest.fixture(scope="session")
def no_events(spark) -> tuple[Silver, Gold]:
    """Silver and gold of an empty trace: the pipeline over empty frames, built once."""
    return build(spark, [])


@pytest.fixture(scope="module")
def folds(spark, request: pytest.FixtureRequest) -> Folds:
    """The module's `MICRO_BATCHES` (pipeline_events.MicroBatches) folded together."""
    return request.module.MICRO_BATCHES.fold(spark)


@pytest.fixture(scope="session")
def nothing_folded(spark) -> Folded:
    """No events folded as a micro-batch into the empty live state, folded once."""
    return folded(spark, LiveState.empty(spark), [], 0)
