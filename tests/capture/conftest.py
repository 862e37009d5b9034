"""The `chaos` tests (long real-cluster scenarios) run only when asked: PULSAR_AUDIT_CHAOS=1
or a `-m` expression naming `chaos`; otherwise they are skipped, saying how to run them."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PULSAR_AUDIT_CHAOS") == "1" or "chaos" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="long chaos scenario: run with PULSAR_AUDIT_CHAOS=1 or -m chaos")
    for item in items:
        if "chaos" in item.keywords:
            item.add_marker(skip)
