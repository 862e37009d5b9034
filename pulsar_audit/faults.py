"""Fault injection for the crash suite: die at a named point, as a power cut would.

Every Delta commit and every stage of `analyze` passes a *kill point* (`point("commit:…")`).
With `PULSAR_AUDIT_KILL_AT=<point>:<n>` the process sends itself SIGKILL the n-th time it
reaches `<point>` (no cleanup, no `finally`, no flush: the state a crash leaves). With
`PULSAR_AUDIT_KILL_LOG=<file>` every point reached is appended to `<file>`, so a clean run
lists the points a crash test can choose from. Unset (production): one dict lookup per point.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

KILL_AT_VAR = "PULSAR_AUDIT_KILL_AT"
KILL_LOG_VAR = "PULSAR_AUDIT_KILL_LOG"

_reached: Counter[str] = Counter()


def point(name: str) -> None:
    """Pass the kill point `name` (e.g. 'commit:producer_events', 'stage:causes')."""
    kill_at = os.environ.get(KILL_AT_VAR)
    kill_log = os.environ.get(KILL_LOG_VAR)
    if not kill_at and not kill_log:
        return
    _reached[name] += 1
    if kill_log:
        with open(kill_log, "a", encoding="utf-8") as handle:
            handle.write(f"{name}:{_reached[name]}\n")
    if kill_at and kill_at == f"{name}:{_reached[name]}":
        os.kill(os.getpid(), signal.SIGKILL)


def reset() -> None:
    """Forget the points passed so far (a test that runs several jobs in one process)."""
    _reached.clear()
