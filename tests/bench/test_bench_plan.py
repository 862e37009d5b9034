"""What bench.run measures for its flags: the sizes and forms, where the 1 % increment goes,
and the 10⁸ run's peak RSS against issue 24's 8 GB bound."""

from __future__ import annotations

from bench.run import parse_args, render, size_plan


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
