"""Capture real traces from a real Pulsar standalone, then analyze them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from json_schema_check import validate
from pulsar_traces import capture_opts, trace_counts, trace_events
from pyspark.sql import functions as F

from capture.harness import capture

pytestmark = pytest.mark.pulsar

# 20,000 in the default run (CI); the 100,000 of the issue with PULSAR_AUDIT_LONG=1.
CONTROL_MESSAGES = 100_000 if os.environ.get("PULSAR_AUDIT_LONG") == "1" else 20_000
UNLOAD_MESSAGES = 20_000
UNLOAD_EVENTS = ("bundle_unload_requested", "bundle_unload_started")
ANOMALY_COUNTS = ("lost", "unseen", "unacked_received", "duplicated", "out_of_order")


def _analyze(lakehouse, config, out: Path) -> dict:  # noqa: ANN001
    from jobs.analyze import analyze

    return analyze(lakehouse, config, out)


# long tier; in the default run: test_unload_in_the_middle_of_a_run (a capture and analyze)
@pytest.mark.long
def test_control_run(standalone, tmp_path: Path, lakehouse, config) -> None:
    out = tmp_path / "control"
    summary = capture(
        capture_opts(standalone, out, topic="control", messages=CONTROL_MESSAGES), standalone
    )
    print(f"\ncontrol: produce {summary['produce_rate']} msg/s, "  # noqa: T201
          f"read {summary['consume']['read_rate']} msg/s")  # fmt: skip

    counts = trace_counts(out)
    assert counts[("producer", "send")] == CONTROL_MESSAGES
    assert counts[("producer", "ack")] == CONTROL_MESSAGES
    assert counts[("producer", "nack")] == 0
    assert counts[("consumer", "receive")] == CONTROL_MESSAGES
    assert counts[("consumer", "end")] == 1
    assert counts[("run", "config")] == 1
    assert counts[("run", "chaos")] == 0

    result = _analyze(lakehouse, config, out)
    assert result["ingest"]["quarantined"] == 0
    [run] = result["runs"]
    assert run["valid"] is True, run
    assert (run["sent"], run["acked"], run["received"]) == (CONTROL_MESSAGES,) * 3
    assert {name: run[name] for name in ANOMALY_COUNTS} == dict.fromkeys(ANOMALY_COUNTS, 0)


def test_unload_in_the_middle_of_a_run(
    standalone, tmp_path: Path, lakehouse, config, capsys
) -> None:
    """One unload run as `pulsar-audit chaos study --json` makes it (its output against
    docs/json-output.schema.json): the capture with the unload, then `analyze` of it."""
    from jobs.cli import main

    out = tmp_path / "study"
    argv = ["chaos", "study", "--workdir", standalone.workdir, "--scenario", "unload"]
    argv += ["--repeat", "1", "--messages", str(UNLOAD_MESSAGES), "--rate", "0"]
    argv += ["--out", str(out), "--lakehouse", str(config.lakehouse_path), "--json"]
    capsys.readouterr()
    assert main(argv) == 0
    study = json.loads(capsys.readouterr().out)
    validate(study, "chaos_study")
    [row] = study["table"]
    assert (row["scenario"], row["runs"], study["out"]) == ("unload", 1, str(out))
    assert row["outages"] == len(study["outages"]) == sum(row["backoff_steps"].values())
    [run_dir] = [path for path in out.iterdir() if path.is_dir()]

    # ZooKeeper was watched during the run: the bundle's ownership znode went and came back.
    zk_rows = [json.loads(line) for line in next((run_dir / "zk").glob("*.zk.jsonl")).open()]
    bundle_ops = {r["op"] for r in zk_rows if r["path"].startswith("/namespace/public/default/")}
    assert {"create", "delete"} <= bundle_ops, sorted(bundle_ops)

    [event] = trace_events(run_dir, "chaos")
    assert event["action"] == "unload"
    assert event["target"].startswith("public/default/0x")
    assert event["ack_count"] >= UNLOAD_MESSAGES // 2
    broker_log = (run_dir / "logs" / "broker" / "standalone.log").read_text()
    assert f"Disabling ownership: {event['target']}" in broker_log
    assert (run_dir / "logs" / "manifest.json").exists()

    counts = trace_counts(run_dir)
    assert counts[("producer", "ack")] == UNLOAD_MESSAGES
    assert counts[("consumer", "receive")] >= UNLOAD_MESSAGES  # duplicates allowed, no loss
    assert counts[("consumer", "end")] == 1

    [lost] = lakehouse.read("run_summary").agg(F.sum("lost")).first()
    assert lost == 0
    assert len(study["outages"]) >= 1, study
    assert all(o["run_id"] == run_dir.name for o in study["outages"])
    # The broker log copied next to the trace names the unload as the outage's cause.
    assert lakehouse.read("broker_log").limit(1).count() == 1
    assert lakehouse.read("zk_changes").limit(1).count() == 1
    first_causes = [o["causes"][0] for o in study["outages"] if o["causes"]]
    assert any(
        c["event_type"] in UNLOAD_EVENTS and event["target"] in c["reason"] for c in first_causes
    ), study["outages"]


def test_capture_run_json_from_the_cli_follows_the_schema(standalone, tmp_path: Path, capsys):
    """`pulsar-audit capture run --json` as typed, against docs/json-output.schema.json."""
    from jobs.cli import main

    out = tmp_path / "cli"
    argv = ["capture", "run", "--service-url", standalone.service_url]
    argv += ["--admin-url", standalone.admin_url, "--topic", "cli-json", "--messages", "500"]
    capsys.readouterr()
    assert main([*argv, "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    validate(result, "capture_run")
    assert (result["messages"], result["acked"], result["nacked"]) == (500, 500, 0)
    assert result["consume"]["received"] == 500
    assert trace_counts(out)[("producer", "send")] == 500


def test_capture_run_columnar_writes_parquet_that_ingest_reads(
    standalone, tmp_path: Path, lakehouse, capsys
):
    """`capture run --columnar`: the spool's JSONL becomes the columnar form when the run
    ends, and ingest takes every event of it."""
    from jobs.cli import main
    from jobs.ingest import ingest_traces

    out = tmp_path / "columnar"
    argv = ["capture", "run", "--service-url", standalone.service_url, "--columnar"]
    argv += ["--admin-url", standalone.admin_url, "--topic", "cli-columnar", "--messages", "300"]
    capsys.readouterr()
    assert main([*argv, "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    validate(result, "capture_run")
    files = [Path(f) for f in result["trace_files"]]
    assert files and all(f.suffix == ".parquet" and f.parent == out for f in files)
    assert sorted(out.glob("trace-*")) == sorted(files)  # the JSONL segments are gone
    report = ingest_traces(lakehouse, out)
    # every event the spool made durable, each accepted: 300 sends and 300 acks among them
    assert report.records == result["events"] > 900
    assert (report.accepted, report.quarantined) == (report.records, 0)
    assert report.runs == [result["run_id"]]
    assert lakehouse.read("producer_events").count() == 600


def test_cluster_up_json_from_the_cli_follows_the_schema(standalone_started) -> None:
    """The session's standalone was started by `pulsar-audit cluster up --json` (conftest)."""
    state, printed = standalone_started
    validate(printed, "cluster_up")
    assert (printed["kind"], printed["running"]) == ("standalone", True)
    assert (printed["service_url"], printed["admin_url"]) == (state.service_url, state.admin_url)
    assert [p["name"] for p in printed["processes"]] == ["standalone"]


def test_zk_dump_capture_and_ingest_json_from_the_cli_follow_the_schema(
    spark, standalone, tmp_path: Path, capsys
) -> None:
    """`zk dump`, `zk capture` (1 s) on the standalone's ZooKeeper, then `ingest zk` of both."""
    from jobs.cli import main

    [process] = standalone.processes
    zookeeper = process.address("zookeeper")

    def json_of(*argv: str) -> dict:
        capsys.readouterr()
        assert main([*argv, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    folder = tmp_path / "zk"
    folder.mkdir()
    dumped = json_of("zk", "dump", "--zookeeper", zookeeper, "--out", str(folder / "d.zk.jsonl"))
    validate(dumped, "zk_dump")
    assert dumped["rows"] > 0  # a running Pulsar has metadata under the default roots
    out = str(folder / "c.zk.jsonl")
    captured = json_of("zk", "capture", "--zookeeper", zookeeper, "--out", out, "--duration", "1")
    validate(captured, "zk_capture")
    assert captured["rows"] > 0 and captured["out"] == out
    ingested = json_of("ingest", "zk", str(folder), "--lakehouse", str(tmp_path / "lakehouse"))
    validate(ingested, "ingest_zk")
    assert ingested["files"] == 2
    assert ingested["records"] == dumped["rows"] + captured["rows"]
