"""What bench.run measures for its flags: the sizes and forms, where the 1 % increment goes,
the 10⁸ run's peak RSS against issue 24's 8 GB bound, and the examples' small increment."""

from __future__ import annotations

import json

from bench.run import LATE_RECORDS, parse_args, render, size_plan, write_late_receive


def test_default_sizes_run_in_every_form_without_an_increment():
    sizes, increment_on = size_plan(parse_args(["--sizes", "1e4,2e6", "--forms", "jsonl,columnar"]))
    assert sizes == [
        ("1e4", 10_000, ["jsonl", "columnar"]),
        ("2e6", 2_000_000, ["jsonl", "columnar"]),
    ]
    assert increment_on is None


def test_1e7_adds_the_size_in_every_form_and_its_increment():
    sizes, increment_on = size_plan(parse_args(["--sizes", "1e4", "--with-1e7"]))
    assert sizes == [("1e4", 10_000, ["jsonl"]), ("1e7", 10_000_000, ["jsonl"])]
    assert increment_on == "1e7"


def test_1e8_runs_only_the_columnar_form_and_takes_the_increment():
    args = parse_args(["--sizes", "1e4", "--forms", "jsonl,columnar", "--with-1e7", "--with-1e8"])
    sizes, increment_on = size_plan(args)
    assert sizes[-2:] == [
        ("1e7", 10_000_000, ["jsonl", "columnar"]),
        ("1e8", 100_000_000, ["columnar"]),
    ]
    assert increment_on == "1e8"
    chosen = parse_args(["--sizes", "1e4", "--with-1e8", "--increment-on", "1e4"])
    assert size_plan(chosen)[1] == "1e4"


def _results(messages: int, rss_gb: float, status: str = "ok") -> dict:
    analyze = {"name": "analyze", "wall_s": 100.0, "cpu_s": 150.0, "peak_rss_gb": rss_gb}
    entry = {
        "size": "1e8-columnar" if messages >= 100_000_000 else "1e4",
        "messages": messages,
        "form": "columnar",
        "records": 3 * messages,
        "checkers": {"analyze": {**analyze, "status": status}},
        "ratios": {"analyze_vs_duckdb": None, "dict_vs_analyze": None},
        "agree": True,
        "compared": ["analyze"],
        "differences": [],
    }
    return {"commit": "0" * 40, "product_code_modified": False, "sizes": [entry]}


def test_the_1e8_run_prints_its_peak_rss_against_8_gb():
    assert "1e8-columnar: analyze's peak RSS (process tree) 6.50 GB, within the 8 GB bound" in (
        render(_results(100_000_000, 6.5))
    )
    assert "9.25 GB, OVER the 8 GB bound" in render(_results(100_000_000, 9.25))
    assert "peak RSS (process tree)" not in render(_results(10_000, 9.25))
    assert "peak RSS (process tree)" not in render(_results(100_000_000, 9.25, "killed"))


def test_the_fixed_costs_print_what_a_small_increment_costs_beside_the_whole(tmp_path):
    late = write_late_receive(tmp_path / "new" / "folder")
    records = [json.loads(line) for line in (late / "late-reader.jsonl").read_text().splitlines()]
    assert len(records) == LATE_RECORDS
    assert {(r["run_id"], r["subscription"], r["event"]) for r in records} == {
        ("synthetic-faults", "late", "receive"),
        ("synthetic-faults", "late", "end"),
    }
    fixed = {"wall_s": 60.0, "cpu_s": 90.0, "peak_rss_gb": 2.0, "vs_bare": 3.0}
    results = _results(10_000, 3.0)
    results["fixed"] = {
        "examples_new": fixed,
        "examples_increment": {**fixed, "wall_s": 63.0, "vs_examples_new": 1.05},
    }
    assert (
        "examples_increment: 2 records added to the examples' lakehouse cost 1.05 × its whole "
        "analyze (examples_new)"
    ) in render(results)
    del results["fixed"]["examples_increment"]
    assert "examples_increment" not in render(results)
