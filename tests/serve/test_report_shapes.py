"""`pulsar-audit report` on runs of every shape, each opened in headless Chromium, its
screenshot taken and what it drew read from the page: a simulated run, a real run from
data/real-runs, a run of one message and a run three hours long."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from headless import CHROMIUM
from in_process_cli import cli_in_process
from json_schema_check import validate
from PIL import Image
from pyspark.sql import SparkSession
from report_probe import cli_report, probe, screenshot

from serve.report_data import MIN_SENDS_PER_SLICE

REPO = Path(__file__).resolve().parents[2]
REAL_RUN = "kill-broker-20261122T125949-1368"  # a broker killed: 2 outages, 13 s and 168 ms
SIMULATED_RUN = "sim-unload"
ONE_MESSAGE_RUN = "one-message"
HOURS_RUN = "three-hours"
HOURS_SENDS = 1080  # one every 10 s for 3 h
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup.sh installs it)"
    ),
    # long tier (four runs analyzed and drawn); in the default run: tests/serve/test_report.py
    # (Chromium draws both charts, the outage bands and the unload marker)
    pytest.mark.long,
]


def _cli(spark: SparkSession, *args: str) -> None:
    code, _, err = cli_in_process(spark, *args)
    assert code == 0, err[-3000:]


def _trace(folder: Path, run_id: str, send_times_ms: list[int]) -> None:
    """A trace (format v1) of one producer whose every message is acked 5 ms after its send
    and read by one reader."""
    start = 1_741_082_400_000
    base = {"run_id": run_id, "topic": f"persistent://public/default/{run_id}"}
    rows = [{**base, "role": "run", "client": "harness", "event": "config", "ts": start - 1000,
             "ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1, "brokers": 1, "bookies": 1,
             "deduplication": False, "scenario": run_id}]  # fmt: skip
    producer = {**base, "role": "producer", "client": "p1", "partition": -1}
    reader = {**base, "role": "consumer", "client": "r1", "partition": -1, "subscription": "r1"}
    for seq, at in enumerate(send_times_ms):
        stored = {"ledger_id": 7, "entry_id": seq}
        rows += [
            {**producer, "event": "send", "seq": seq, "ts": start + at, "event_index": 2 * seq},
            {**producer, "event": "ack", "seq": seq, "ts": start + at + 5, **stored,
             "batch_index": -1, "event_index": 2 * seq + 1},
            {**reader, "event": "receive", "seq": seq, "producer": "p1", **stored,
             "ts": start + at + 8, "event_index": seq},
        ]  # fmt: skip
    last = start + send_times_ms[-1] + 20
    rows.append({**reader, "event": "end", "ts": last, "event_index": len(send_times_ms)})
    folder.mkdir(parents=True)
    (folder / f"{run_id}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def reports(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """The four runs analyzed into one lakehouse, and each one's report, all by the CLI (its
    entry point in this process: the tests' Spark session, no JVM start per command)."""
    root = tmp_path_factory.mktemp("shapes")
    runs, lakehouse = root / "runs", root / "lakehouse"
    simulated = [
        "--messages",
        "2000",
        "--run-id",
        SIMULATED_RUN,
        "--out",
        str(runs / SIMULATED_RUN),
    ]
    _cli(
        spark, "simulate", "run", "--scenario", "unload", *simulated, "--lakehouse", str(lakehouse)
    )
    # The data set's archives unpack as jobs/training_runs.py does it.
    with tarfile.open(REPO / "data" / "real-runs" / f"{REAL_RUN}.tar.gz") as tar:
        tar.extractall(runs, filter="data")
    _trace(runs / ONE_MESSAGE_RUN, ONE_MESSAGE_RUN, [0])
    _trace(runs / HOURS_RUN, HOURS_RUN, [i * 10_000 for i in range(HOURS_SENDS)])
    _cli(spark, "analyze", str(runs), "--lakehouse", str(lakehouse))
    return {
        run: cli_report(spark, lakehouse, run, root / f"{run}.html")
        for run in (SIMULATED_RUN, REAL_RUN, ONE_MESSAGE_RUN, HOURS_RUN)
    }


@pytest.fixture(scope="module")
def drawn(reports, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, Path]]:
    """Each report opened once at 1024 pixels and read, and its full-length screenshot."""
    work = tmp_path_factory.mktemp("drawn")
    return {run: (probe(out, work), screenshot(out, work)) for run, (out, _) in reports.items()}


def _timeline(seen: dict) -> dict[str, dict]:
    return {t["name"]: t for t in seen["chart-timeline"]["traces"]}


@pytest.mark.parametrize("run", [SIMULATED_RUN, REAL_RUN, ONE_MESSAGE_RUN, HOURS_RUN])
def test_every_run_shape_draws_a_dated_axis_its_latency_and_a_table_within_the_page(
    reports, drawn, run: str
) -> None:
    _, summary = reports[run]
    validate(summary, "report")
    assert summary["bytes"] < 1_000_000
    seen, shot = drawn[run]
    timeline = seen["chart-timeline"]
    assert timeline["x_type"] == "date"
    assert timeline["x_title"][-1].startswith("time of day (")
    assert timeline["x_ticks"] and all(":" in tick for tick in timeline["x_ticks"])
    latency = _timeline(seen)["latency p50"]
    assert latency["points"] == summary["points"]
    assert latency["values"] >= 1  # the run's latency points are there ...
    assert latency["drawn"] == latency["values"]  # ... and every one of them is drawn
    assert seen["page_width"] <= seen["viewport"] and seen["summary_right"] <= seen["viewport"]
    image = Image.open(shot)
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 100  # not blank


def test_the_real_run_shows_its_broker_loss_and_both_outages(reports, drawn) -> None:
    _, summary = reports[REAL_RUN]
    assert summary["outages"] == 2 and summary["markers"] >= 10
    # 1000 sends over 18 s: 200 ms slices, more than 10 sends in each.
    assert summary["slice_ms"] == 200
    assert 1000 / summary["points"] >= MIN_SENDS_PER_SLICE
    seen = drawn[REAL_RUN][0]
    labels = seen["chart-timeline"]["subplot_titles"]
    assert {"broker lost", "kill-broker (chaos)"} <= set(labels)
    events = _timeline(seen)["infrastructure event"]
    assert events["points"] == summary["markers"]


def test_the_simulated_run_shows_its_unload(reports, drawn) -> None:
    _, summary = reports[SIMULATED_RUN]
    assert summary["verdict"] is True and summary["markers"] >= 1
    assert 2000 / summary["points"] >= MIN_SENDS_PER_SLICE
    seen = drawn[SIMULATED_RUN][0]
    assert "unload (chaos)" in seen["chart-timeline"]["subplot_titles"]


def test_a_run_of_one_message_is_one_slice_with_its_latency(reports, drawn) -> None:
    _, summary = reports[ONE_MESSAGE_RUN]
    assert summary["points"] == 1 and summary["verdict"] is True
    seen = drawn[ONE_MESSAGE_RUN][0]
    traces = _timeline(seen)
    assert traces["latency p50"]["max"] == 5  # acked 5 ms after its send
    assert traces["send rate"]["values"] == 1


def test_a_three_hour_run_is_cut_into_two_minute_slices(reports, drawn) -> None:
    _, summary = reports[HOURS_RUN]
    # 1080 sends over 3 h: 10 sends a slice at least, so 2-minute slices, 90 of them.
    assert summary["slice_ms"] == 120_000 and summary["points"] == 90
    seen = drawn[HOURS_RUN][0]
    traces = _timeline(seen)
    assert traces["send rate"]["max"] == pytest.approx(0.1)  # one send every 10 s
    assert traces["latency p50"]["values"] == 90
    assert "per 120 s slice" in " ".join(seen["chart-timeline"]["subplot_titles"])
