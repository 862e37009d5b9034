"""bench.warm_analyze's comparison: two `analyze --json` results are equal but for timings."""

from __future__ import annotations

from bench.warm_analyze import render, timeless


def test_timings_aside_two_results_compare_on_everything_else():
    cold = {"ingest": {"records": 3, "seconds": 12.5}, "runs": [{"run_id": "r", "seconds": 1}]}
    warm = {"ingest": {"records": 3, "seconds": 4.1}, "runs": [{"run_id": "r", "seconds": 2}]}
    assert timeless(cold) == timeless(warm) == {"ingest": {"records": 3}, "runs": [{"run_id": "r"}]}
    other = {"ingest": {"records": 2, "seconds": 4.1}, "runs": [{"run_id": "r"}]}
    assert timeless(other) != timeless(cold)


def test_the_table_names_a_differing_result():
    row = {
        "input": "/x/loop1", "records": 48106, "cold_s": 50.5, "cold_cpu_s": 61.9,
        "warm_s": 39.7, "ratio": 1.27, "cold_x_bare": 7.87, "warm_x_bare": 6.19,
        "same_result": False, "exit_codes": [0, 0],
    }  # fmt: skip
    result = {
        "bare_s": 6.42, "server_start_s": 15.3, "jobs_run_by_server": 1,
        "load_before": (1.0, 1.0, 1.0), "load_after": (2.0, 2.0, 2.0), "rows": [row],
    }  # fmt: skip
    table = render(result).splitlines()
    assert (
        table[-1] == "| loop1 | 48,106 | 50.5 (61.9) | 39.7 | 1.27 | 7.87 | 6.19 | NO (exit 0/0) |"
    )
    assert "bare Spark+Delta session 6.42 s; server start 15.3 s; 1 analyze job(s)" in table[0]
