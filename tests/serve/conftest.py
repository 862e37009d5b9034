"""The examples/ folder analyzed once into a session lakehouse, for forensics and the report."""

from __future__ import annotations

import pytest
from serve_examples import EXAMPLES

from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse


@pytest.fixture(scope="session")
def examples_lakehouse(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    """`analyze examples/` (the synthetic run and the real unload run), done once."""
    from jobs.analyze import analyze

    config = load_config("local", lakehouse=str(tmp_path_factory.mktemp("examples") / "lh"))
    lakehouse = Lakehouse(spark, config)
    analyze(lakehouse, config, EXAMPLES)
    return lakehouse
