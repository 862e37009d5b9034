"""The read-back opens its reader or consumer again when the topic's lookup times out (right
after a fault, while the bundle's ownership settles), a bounded number of times."""

from __future__ import annotations

import pulsar
import pytest

from capture.consume import OPEN_ATTEMPTS, open_retrying


def flaky(timeouts: int, error: type[Exception] = pulsar.Timeout):  # noqa: ANN201
    """A callable that raises `error` `timeouts` times, then returns how often it was called."""
    calls = []

    def open_it() -> int:
        calls.append(1)
        if len(calls) <= timeouts:
            raise error("lookup timed out")
        return len(calls)

    return open_it, calls


def test_a_timed_out_open_is_tried_again_until_it_opens() -> None:
    open_it, calls = flaky(OPEN_ATTEMPTS - 1)
    assert open_retrying(open_it) == OPEN_ATTEMPTS
    assert len(calls) == OPEN_ATTEMPTS


def test_the_last_timeout_is_raised_after_every_attempt() -> None:
    open_it, calls = flaky(OPEN_ATTEMPTS)
    with pytest.raises(pulsar.Timeout):
        open_retrying(open_it)
    assert len(calls) == OPEN_ATTEMPTS


def test_other_errors_are_not_tried_again() -> None:
    open_it, calls = flaky(1, pulsar.TopicNotFound)
    with pytest.raises(pulsar.TopicNotFound):
        open_retrying(open_it)
    assert len(calls) == 1
