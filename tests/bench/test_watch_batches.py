"""bench/watch_batches.py: a watch's `-v` log read into its micro-batches and the stages inside
each; with --rounds, the micro-batches after the first summed per checkout and round."""

from __future__ import annotations

from bench.watch_batches import micro_batches, round_sums, rounds_table

LOG = """\
2026-12-01 07:08:59,362 INFO jobs.stages: stage create tables: 0.4 s
2026-12-01 07:08:59,362 INFO jobs.stages: stage ingest traces: 7.7 s
2026-12-01 07:09:12,076 INFO jobs.stages: stage live state: 12.6 s
2026-12-01 07:09:16,016 INFO jobs.stages: stage micro-batch 0: 1 file(s): 24.4 s
2026-12-01 07:09:22,642 INFO jobs.stages: stage ingest traces: 4.2 s
2026-12-01 07:09:31,069 INFO jobs.stages: stage live state: 8.3 s
2026-12-01 07:09:35,261 INFO jobs.stages: stage micro-batch 1: 1 file(s): 16.8 s
2026-12-01 07:09:40,804 INFO jobs.stages: stage ingest traces: 3.5 s
2026-12-01 07:09:47,259 INFO jobs.stages: stage live state: 6.4 s
2026-12-01 07:09:48,259 INFO jobs.stages: stage commit: 1.1 s
2026-12-01 07:09:50,420 INFO jobs.stages: stage micro-batch 2: 1 file(s): 13.2 s
2026-12-01 07:10:25,790 INFO jobs.stages: stage ingest traces: 8.1 s
2026-12-01 07:10:40,000 INFO jobs.stages: stage analyze: 45.0 s
"""


def test_a_micro_batch_holds_the_stages_logged_before_its_own_line() -> None:
    batches = micro_batches(LOG)

    assert [(number, seconds) for number, seconds, _ in batches] == [
        (0, 24.4),
        (1, 16.8),
        (2, 13.2),
    ]
    # after each: from its end to the next micro-batch's start (its end less its seconds),
    # the last to the leaving analyze's start
    assert batches[0][2] == {
        "create tables": 0.4,
        "ingest traces": 7.7,
        "live state": 12.6,
        "after it": 2.4,  # 07:09:16.016 → 07:09:35.261 - 16.8 s
    }
    assert batches[1][2]["after it"] == 2.0  # → 07:09:50.420 - 13.2 s
    assert batches[2][2] == {
        "ingest traces": 3.5,
        "live state": 6.4,
        "commit": 1.1,
        "after it": 4.6,  # → 07:10:40.000 - 45.0 s
    }


def test_without_a_next_stage_a_micro_batch_has_no_after() -> None:
    cut = LOG[: LOG.index("2026-12-01 07:10:25")]
    assert "after it" not in micro_batches(cut)[-1][2]


def test_a_round_sums_the_micro_batches_after_the_first() -> None:
    sums = round_sums(micro_batches(LOG))

    assert sums == {
        "micro-batches": 30.0,
        "live state": 14.7,
        "ingest traces": 7.7,
        "after it": 6.6,
    }


def test_the_rounds_table_has_a_row_per_checkout_and_round_in_the_order_they_ran() -> None:
    batches = micro_batches(LOG)
    table = rounds_table([("baseline", 1, batches), ("watch", 1, batches[:2]), ("baseline", 2, [])])

    assert table.splitlines()[2:] == [
        "| baseline | 1 | 3 | 30.0 | 14.7 | 7.7 | 6.6 |",
        "| watch | 1 | 2 | 16.8 | 8.3 | 4.2 | 2.0 |",
        "| baseline | 2 | 0 | 0.0 | 0.0 | 0.0 | 0.0 |",
    ]
