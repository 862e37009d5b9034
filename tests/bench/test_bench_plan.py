"""What bench.run measures for its flags: the sizes and forms, where the 1 % increment goes,
the 10⁸ run's peak RSS against issue 24's 8 GB bound, the examples' small increment, and a
run in steps recorded across invocations (--in-steps)."""

from __future__ import annotations

import json
import sys

import pytest

from bench.run import LATE_RECORDS, Bench, parse_args, render, size_plan, write_late_receive


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


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_in_steps_a_step_that_ended_well_is_reused_and_one_that_did_not_runs_again(tmp_path):
    bench = Bench(parse_args(["--in-steps", "--workdir", str(tmp_path)]))

    def step(name: str, code: str):
        return lambda: bench.measure(name, _python(code))

    first = bench.once("1e8", "duckdb", step("duckdb", "print('counted')"))
    assert (first.status, first.stdout) == ("ok", "counted\n")
    again = bench.once("1e8", "duckdb", step("duckdb", "raise SystemExit(3)"))
    assert (again.status, again.stdout, again.wall_s) == ("ok", "counted\n", first.wall_s)

    failed = bench.once("1e8", "dict", step("dict", "raise SystemExit(3)"))
    assert (failed.status, failed.exit_code) == ("failed", 3)
    # a session that ended mid-step leaves only its start
    state = json.loads(bench.steps_file("1e8").read_text())
    state["ingest"] = {"name": "ingest", "status": "started", "at": 1.0, "earlier": []}
    bench.steps_file("1e8").write_text(json.dumps(state))
    retried = bench.once("1e8", "dict", step("dict", "print('again')"))
    resumed = bench.once("1e8", "ingest", step("ingest", "print('ingested')"))
    assert (retried.status, resumed.status) == ("ok", "ok")

    assert bench.attempts == {("1e8", "duckdb"): 1, ("1e8", "dict"): 2, ("1e8", "ingest"): 2}
    state = json.loads(bench.steps_file("1e8").read_text())
    assert {r["commit"] for r in state.values()} == {bench.results["commit"]}
    assert [e["exit_code"] for e in state["dict"]["earlier"]] == [3]
    assert state["dict"]["stdout"] == "again\n"
    assert [e["status"] for e in state["ingest"]["earlier"]] == ["started"]
    assert state["duckdb"]["earlier"] == []
    assert "stdout" not in state["dict"]["earlier"][0]  # only a step that ended well keeps it


def test_without_in_steps_every_step_runs_and_nothing_is_recorded(tmp_path):
    bench = Bench(parse_args(["--workdir", str(tmp_path)]))
    for code in ("print(1)", "print(2)"):
        m = bench.once("1e4", "duckdb", lambda c=code: bench.measure("duckdb", _python(c)))
        assert m.stdout == code[-2] + "\n"
    assert not bench.steps_file("1e4").exists()


def test_in_steps_takes_no_profile_and_prints_each_step():
    with pytest.raises(SystemExit):
        parse_args(["--in-steps", "--profile"])
    results = _results(100_000_000, 6.5)
    steps = [
        {"name": "analyze-1e8-columnar-ingest", "wall_s": 4000.0, "cpu_s": 5000.0},
        {"name": "analyze-1e8-columnar-analyze", "wall_s": 60.0, "cpu_s": 90.0},
    ]
    analyze = results["sizes"][0]["checkers"]["analyze"]
    analyze["steps"] = [{**s, "peak_rss_gb": 4.5, "status": "ok", "attempts": 1} for s in steps]
    printed = render(results)
    assert "steps of analyze-1e8-columnar:" in printed
    assert "| analyze-1e8-columnar-ingest | 4000.0 | 5000.0 | 4.50 | ok | 1 |" in printed
    assert "resumed" not in printed
    assert "steps of" not in render(_results(100_000_000, 6.5))
    # a step resumed after a stop, and an increment: each says its figure leaves work out
    analyze["steps"][0]["attempts"] = 2
    inc = {"size": "1e8", "messages": 1_000_000, "analyze": {"wall_s": 300.0}, "attempts": 1}
    results["increment"] = {**inc, "vs_full_run": 0.07}
    printed = render(results)
    assert "| analyze-1e8-columnar-ingest | 4000.0 | 5000.0 | 4.50 | ok | 2 |" in printed
    assert "resumed after a stop: analyze-1e8-columnar-ingest: each figure is its last" in printed
    assert "300.0 s = 0.07 × the full run" in printed
    assert "resumed: attempt" not in printed
    results["increment"]["attempts"] = 3
    assert "(resumed: attempt 3; what the stopped attempts committed" in render(results)
