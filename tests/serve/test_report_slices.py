"""The report's rate slices are sized to the run: about 100 over a short run, 1 s over a long one,
never so thin that an average slice holds fewer than MIN_SENDS_PER_SLICE sends."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from serve.report_data import MAX_SLICES, Window, slice_width_us

START = datetime(2026, 11, 22, 2, 42, 53)


def _window(seconds: float, sends: int) -> Window:
    return Window(START, START + timedelta(seconds=seconds), sends)


@pytest.mark.parametrize(
    ("seconds", "sends", "slice_ms"),
    [
        (0.0, 1, 1),  # one message, sent and acked in the same µs: one 1 ms slice
        (0.004, 1, 50),  # one message acked after 4 ms: one slice
        (1.18, 4000, 20),  # the example unload run: 59 slices, not 600 of 2 ms
        (2.992, 300, 100),  # the synthetic run: a send every 10 ms, 10 a slice
        (75.0, 1000, 1000),  # a real kill-broker run: 1 s slices
        (3600.0, 1_000_000, 1000),  # an hour at 278 msg/s: 1 s slices
        (3 * 3600.0, 1_000_000, 5000),  # three hours: at most 3600 slices
        (3 * 3600.0, 30, 3_600_000),  # three hours, 30 messages: 10 sends a slice at least
    ],
)
def test_slices_are_sized_to_the_run(seconds: float, sends: int, slice_ms: int) -> None:
    window = _window(seconds, sends)
    width_us = slice_width_us(window)
    assert width_us == slice_ms * 1000
    assert window.width_us / width_us <= MAX_SLICES


def test_a_run_of_many_sends_gets_at_least_ten_sends_a_slice() -> None:
    window = _window(1.18, 4000)
    slices = -(-window.width_us // slice_width_us(window))
    assert 4000 / slices >= 10
