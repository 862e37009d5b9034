"""`live_long` tests (the real command line, killed and restarted: many minutes) run only when
asked: `-m live_long` or PULSAR_AUDIT_LONG_TESTS=1."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    asked = "live_long" in (config.option.markexpr or "")
    if asked or os.environ.get("PULSAR_AUDIT_LONG_TESTS") == "1":
        return
    wait = pytest.mark.skip(
        reason="many minutes: run with -m live_long or PULSAR_AUDIT_LONG_TESTS=1"
    )
    for item in (i for i in items if i.get_closest_marker("live_long")):
        item.add_marker(wait)
