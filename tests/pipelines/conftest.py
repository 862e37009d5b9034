"""Pipeline builds shared by the tests of a module (its `CASES`) or of the folder (no events)."""

from __future__ import annotations

import pytest
from pipeline_events import Gold, Runs, build

from pipelines.build import Silver


@pytest.fixture(scope="module")
def runs(spark, request: pytest.FixtureRequest) -> Runs:
    """The module's `CASES` (pipeline_events.Cases) built as the runs of one pipeline build."""
    return request.module.CASES.build(spark)


@pytest.fixture(scope="session")
def no_events(spark) -> tuple[Silver, Gold]:
    """Silver and gold of an empty trace: the pipeline over empty frames, built once."""
    return build(spark, [])
