"""The checks' Great Expectations imported and its context built in a background thread.

Importing GX alone takes 2.2 s here (measured); a cold job starts this before its Spark
session, so that both go on at once instead of one after the other. This module imports
nothing of GX itself.
"""

from __future__ import annotations

import threading


def _warm_up() -> None:
    try:
        from checks.gx import warm_up
    except Exception:  # noqa: BLE001 - the first validation imports it again and reports it
        return
    warm_up()


def warm_up_in_background() -> threading.Thread:
    """Start importing GX and building the checks' context (a daemon thread, returned; a
    failure is left to the first validation, which imports and builds them again and reports
    it). The process's clock is put on UTC first, as the session's start would later: the
    warm-up's imports may read the process's zone."""
    from pulsar_audit.spark import utc_process_clock

    utc_process_clock()
    thread = threading.Thread(target=_warm_up, name="gx-warm-up", daemon=True)
    thread.start()
    return thread
