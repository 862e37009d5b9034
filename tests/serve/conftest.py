"""The examples/ folder analyzed once into a session lakehouse, for forensics and the report."""

from __future__ import annotations

import pytest
from serve_examples import EXAMPLES

from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse


@pytest.fixture(scope="session")
def examples_analyzed(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Lakehouse, dict]:
    """`analyze examples/` (the synthetic run and the real unload run), done once: the
    lakehouse and what that analyze returned (as `analyze --json` prints it)."""
    from jobs.analyze import analyze

    config = load_config("local", lakehouse=str(tmp_path_factory.mktemp("examples") / "lh"))
    lakehouse = Lakehouse(spark, config)
    return lakehouse, analyze(lakehouse, config, EXAMPLES)


@pytest.fixture(scope="session")
def examples_lakehouse(examples_analyzed: tuple[Lakehouse, dict]) -> Lakehouse:
    """The lakehouse of `examples_analyzed`."""
    return examples_analyzed[0]
