"""Delta's optimistic concurrency: a commit that lost a race with another job is retried.

Two jobs on one lakehouse each read a table's snapshot and commit; when the other committed
first and touched what this commit read, Delta refuses it (ConcurrentAppendException and
friends) and nothing of it is written. It is then run again from the table's new state, a
bounded number of times with a growing, jittered pause, and finally refused with a message
that says what to do.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

import delta.exceptions.captured  # noqa: F401 - maps Delta's commit conflicts to these classes
from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)

from pulsar_audit.errors import ConcurrentJobError

log = logging.getLogger(__name__)

COMMIT_CONFLICTS = (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
COMMIT_ATTEMPTS = 6
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 8.0
R = TypeVar("R")


def retry_commit(what: str, action: str, commit: Callable[[], R]) -> R:
    """Run `commit` (one Delta commit); retry it when it conflicted with another job's.

    what: the table, for messages; action: the kind of write (append, merge, …).
    """
    delay = RETRY_FIRST_S
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return commit()
        except COMMIT_CONFLICTS as exc:
            if attempt == COMMIT_ATTEMPTS:
                raise ConcurrentJobError(
                    f"{what}: the {action} conflicted with another job's commit "
                    f"{COMMIT_ATTEMPTS} times in a row ({type(exc).__name__}); nothing of this "
                    "write was committed. Another pulsar-audit job is writing the same "
                    "lakehouse: run the command again when it is done"
                ) from exc
            pause = delay * random.uniform(0.5, 1.5)
            log.warning(
                "%s: %s conflicted with a concurrent commit (%s); retry %d/%d in %.1f s",
                what,
                action,
                type(exc).__name__,
                attempt,
                COMMIT_ATTEMPTS - 1,
                pause,
            )
            time.sleep(pause)
            delay = min(delay * 2, RETRY_MAX_S)
    raise AssertionError("unreachable")
