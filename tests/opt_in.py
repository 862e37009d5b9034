"""The opt-in markers: a test with one of them is skipped, saying how to run it, unless its
switch is set or the run's `-m` expression names the marker (tests/conftest.py applies them).

`long` is the long tier: end-to-end repeats, on a real cluster or a larger input, of what the
default run (CI) checks with a cheaper test of the same kind; each names that cheaper test, and
docs/testing.md lists them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import pytest

OPT_IN = {
    "long": ("PULSAR_AUDIT_LONG_TESTS", "1", "long tier"),
    "risk_e2e": ("PULSAR_AUDIT_LONG_TESTS", "1", "minutes long"),
    "live_long": ("PULSAR_AUDIT_LONG_TESTS", "1", "many minutes"),
    "chaos": ("PULSAR_AUDIT_CHAOS", "1", "long chaos scenario"),
}


def opt_in_skips(markexpr: str, environ: Mapping[str, str]) -> dict[str, pytest.MarkDecorator]:
    """The skip for each opt-in marker that this run did not ask for."""
    skips = {}
    for marker, (switch, value, what) in OPT_IN.items():
        if environ.get(switch) == value or re.search(rf"(?<!not )\b{marker}\b", markexpr):
            continue
        skips[marker] = pytest.mark.skip(
            reason=f"{what}: run with -m {marker} or {switch}={value} (or PULSAR_AUDIT_LONG=1)"
        )
    return skips


def long_tier_on(config: pytest.Config) -> bool:
    """Whether this run includes the `long` tier (for a fixture that builds more for it)."""
    return "long" not in opt_in_skips(config.option.markexpr or "", os.environ)
