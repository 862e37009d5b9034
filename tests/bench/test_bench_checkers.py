"""The benchmark's reference checkers agree with each other and with the simulator's truth, and
its simulated traces hold every anomaly kind the benchmark is about."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("duckdb", reason="the bench extra is not installed: pip install -e '.[bench]'")

from bench import dict_check, duckdb_check  # noqa: E402
from bench.counts import differences, totals  # noqa: E402
from bench.simulated import (  # noqa: E402
    TRACE_WRITTEN,
    from_truth,
    generate,
    scenarios,
    simulated_messages,
    truth_folder,
)

MESSAGES = 4_000
TOPIC = "persistent://public/default/sim"


@pytest.fixture(scope="module")
def traces(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "traces"
    generate(spark, out, MESSAGES, seed=11)
    return out


def test_duckdb_dict_checkers_and_the_truth_agree_on_every_count(traces: Path) -> None:
    by_duckdb = duckdb_check.check(traces)
    by_dict = dict_check.check(traces)
    truth = from_truth(traces)

    assert differences(by_duckdb, by_dict) == []
    assert differences(truth, by_duckdb) == []
    assert by_duckdb["records"] == by_dict["records"] > 2 * MESSAGES
    keys = {(r["run_id"], r["subscription"]) for r in by_duckdb["runs"]}
    owner = ["sub-1", "reader-1", "reader-early", "sub-shared", "sub-failover"]
    assert {("bench-owner", s) for s in owner} <= keys
    # reader-1 of the quorum run blocks at its first entry (the whole ledger was on the two
    # killed bookies): it received nothing and has no `end`; its `subscribe` line (written
    # first, as the harness does) still shows it, with every acked message unseen
    assert {s for r, s in keys if r == "bench-quorum"} == {"reader-1", "reader-skip", "sub-1"}
    stuck = next(
        r
        for r in by_duckdb["runs"]
        if (r["run_id"], r["subscription"]) == ("bench-quorum", "reader-1")
    )
    assert (stuck["received"], stuck["lost"], stuck["unseen"]) == (0, 0, stuck["acked"])
    assert stuck["acked"] > 0
    assert {r for r, _ in keys} == {"bench-owner", "bench-crash", "bench-quorum"}
    assert {r["topic"] for r in by_duckdb["runs"]} == {TOPIC}


def test_simulated_traces_hold_every_anomaly_kind_of_the_benchmark(traces: Path) -> None:
    report = duckdb_check.check(traces)
    counts = totals(report)

    # out_of_order's walk: on the Shared subscription, where it is shared_reordered
    kinds = ["nacked", "lost", "unseen", "duplicated", "redelivered", "shared_reordered"]
    kinds += ["unacked_received", "outages"]
    assert [k for k in kinds if counts[k] == 0] == []
    assert counts["sent"] // len({r["subscription"] for r in report["runs"]}) > 0
    assert sum(r["sent"] for r in report["runs"] if r["subscription"] == "sub-1") == (
        simulated_messages(MESSAGES)
    )
    # reader-skip ended and skipped the unreadable entries: lost; reader-early has no `end`:
    # what it missed is unseen
    by_key = {(r["run_id"], r["subscription"]): r for r in report["runs"]}
    skipping, early = by_key["bench-quorum", "reader-skip"], by_key["bench-owner", "reader-early"]
    assert skipping["lost"] > 0 == skipping["unseen"]
    assert early["unseen"] > 0 == early["lost"]


def test_a_run_is_the_same_for_a_seed(spark, tmp_path: Path) -> None:
    """Same seed, same bytes (one of the benchmark's runs, simulated twice)."""
    from simulate.run import simulate_run
    from simulate.scenario import scenario_from

    crash = next(
        s for s in scenarios(400, seed=5, prefix="bench") if s["scenario"] == "kill-broker"
    )
    first = simulate_run(spark, scenario_from(crash), tmp_path / "first", gzip=False)
    again = simulate_run(spark, scenario_from(crash), tmp_path / "again", gzip=False)

    assert again["files"] == first["files"]
    files = [(tmp_path / "first" / n, tmp_path / "again" / n) for n in first["files"]]
    assert [b.read_bytes() for _, b in files] == [a.read_bytes() for a, _ in files]
    assert again["runs"] == first["runs"] and again["outages"] == first["outages"]


def test_an_interrupted_generation_resumes_with_the_same_files(spark, traces, tmp_path) -> None:
    out = tmp_path / "traces"
    shutil.copytree(traces, out)
    shutil.copytree(truth_folder(traces), truth_folder(out))
    truths = truth_folder(out)

    def truth_of(run: str) -> dict:
        return json.loads((truths / run / "truth.json").read_text())

    def written_at(run: str) -> int:
        return (truths / run / "truth.json").stat().st_mtime_ns

    kept = {run: written_at(run) for run in ("bench-owner", "bench-crash")}
    quorum_at = written_at("bench-quorum")
    # killed while simulating the quorum run: the owner run finished (a file of an earlier try
    # left in `out`); the crash run finished, half its files not yet moved out of its folder;
    # the quorum run's truth.json from an earlier try, its files gone
    (out / "trace-bench-owner-99999.jsonl").write_text("{}\n")
    crash = truth_of("bench-crash")["files"]
    for name in crash[: len(crash) // 2 + 1]:
        (out / name).rename(truths / "bench-crash" / name)
    quorum = truth_of("bench-quorum")
    for name in quorum["files"]:
        (out / name).unlink()

    files = generate(spark, out, MESSAGES, seed=11, resume=True)

    expected = sorted(p.name for p in traces.iterdir())
    assert sorted(p.name for p in files) == sorted(p.name for p in out.iterdir()) == expected
    assert [n for n in expected if (out / n).read_bytes() != (traces / n).read_bytes()] == []
    # the two finished runs kept, not simulated again; the quorum run simulated again
    assert {run: written_at(run) for run in kept} == kept
    assert written_at("bench-quorum") != quorum_at
    assert {**truth_of("bench-quorum"), "generate_s": 0} == {**quorum, "generate_s": 0}


def _stopped_in_truth(traces: Path, out: Path, run: str, **scenario: object) -> tuple:
    """A copy of `traces` in `out` as a generation stopped while `run`'s truth was computed
    leaves it: the run's files still in its truth folder, recorded whole with its options
    (`scenario`: options changed from the run's). (The run's folder, its old truth.)"""
    shutil.copytree(traces, out)
    shutil.copytree(truth_folder(traces), truth_folder(out))
    folder = truth_folder(out) / run
    truth = json.loads((folder / "truth.json").read_text())
    for name in truth["files"]:
        (out / name).rename(folder / name)
    (folder / "truth.json").unlink()
    options = {k: truth[k] for k in ("scenario", "outage_threshold_ms", "backoff_ladder_ms")}
    options["scenario"] = {**options["scenario"], **scenario}
    (folder / TRACE_WRITTEN).write_text(json.dumps({**options, "files": truth["files"]}))
    return folder, truth


def test_a_run_stopped_after_its_trace_files_keeps_them_and_computes_its_truth(
    spark, traces, tmp_path
) -> None:
    out = tmp_path / "traces"
    folder, truth = _stopped_in_truth(traces, out, "bench-quorum")
    marked = {n: (folder / n).stat().st_mtime_ns for n in truth["files"]}

    files = generate(spark, out, MESSAGES, seed=11, resume=True)

    assert sorted(p.name for p in files) == sorted(p.name for p in traces.iterdir())
    changed = [p.name for p in files if p.read_bytes() != (traces / p.name).read_bytes()]
    assert changed == []
    # the files were kept (moved, not written again) and the truth computed again, the same
    assert {n: (out / n).stat().st_mtime_ns for n in truth["files"]} == marked
    again = json.loads((folder / "truth.json").read_text())
    assert {**again, "generate_s": 0} == {**truth, "generate_s": 0}
    assert not (folder / TRACE_WRITTEN).exists()


def test_trace_files_of_other_options_are_not_kept(spark, traces, tmp_path) -> None:
    out = tmp_path / "traces"
    folder, truth = _stopped_in_truth(traces, out, "bench-crash", seed=12)
    for name in truth["files"]:
        (folder / name).write_text("{}\n")  # not what this seed writes

    generate(spark, out, MESSAGES, seed=11, resume=True)

    assert [n for n in truth["files"] if (out / n).read_bytes() != (traces / n).read_bytes()] == []
