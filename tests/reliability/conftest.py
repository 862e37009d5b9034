"""What issue 15's suites share: one clean reference run.

The crash, bad-environment and concurrency suites compare what their jobs leave with one
clean `analyze` over one small input folder (reliability_lakehouse.build_inputs), computed
once per test session in the tests' Spark session. Every suite runs its short version by
default; PULSAR_AUDIT_RELIABILITY=long adds the long ones (scripts/reliability.py drives
them and records the figures in docs/reliability.md).
"""

from __future__ import annotations

import pytest
from reliability_lakehouse import Reference, clean_reference


@pytest.fixture(scope="session")
def reference(spark, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    from spark_test_conf import CHILD_SPARK_CONF

    # the suites' child processes (the crash chain, the concurrent pair) run with its settings
    return clean_reference(spark, tmp_path_factory.mktemp("reliability"), CHILD_SPARK_CONF)
