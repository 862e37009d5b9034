"""Forensics on the analyzed examples: one message's life, `--as-of` after a rerun, `sql`."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import shutil
from pathlib import Path

import pytest
from in_process_cli import cli_in_process
from json_schema_check import validate as _validate
from serve_examples import SYNTHETIC_RUN

from bench.run import write_late_receive
from pulsar_audit.config import AlertsConfig, FileSinkConfig, SinkConfig, load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.output import print_json
from serve.forensics import message_life
from serve.snapshot import Snapshot, parse_as_of
from serve.sql import run_sql

TOPIC = "persistent://public/default/orders"


def _life(lakehouse: Lakehouse, seq: int, at=None) -> dict:  # noqa: ANN001
    return message_life(Snapshot(lakehouse, at), SYNTHETIC_RUN, seq)


def _where(rows: list[dict]) -> list[str]:
    return [f"{r['ledger_id']}:{r['entry_id']}" for r in rows]


def test_a_lost_message_was_acked_and_never_delivered(examples_lakehouse) -> None:
    life = _life(examples_lakehouse, 51)
    assert life["message"] == {
        "run_id": SYNTHETIC_RUN, "topic": TOPIC, "partition": -1, "producer": "p1", "seq": 51,
    }  # fmt: skip
    assert [e["event"] for e in life["producer_events"]] == ["send", "ack"]
    assert _where(life["producer_events"][1:]) == ["10:51"]
    assert life["history"]["acked"] and life["history"]["ack_latency_ms"] == 2.0
    assert life["deliveries"] == []
    [lost] = [f for f in life["findings"] if f["kind"] == "lost"]
    assert (lost["seq_from"], lost["seq_to"], lost["subscription"]) == (50, 52, "reader-1")


def test_a_duplicated_message_was_stored_and_delivered_under_two_message_ids(
    examples_lakehouse,
) -> None:
    life = _life(examples_lakehouse, 102)
    assert _where(life["producer_events"][1:]) == ["11:102"]
    assert life["history"]["ack_latency_ms"] == 30.0
    assert _where(life["deliveries"]) == ["10:102", "11:102"]
    assert [d["consumer"] for d in life["deliveries"]] == ["reader-1", "reader-1"]
    assert "duplicated" in {f["kind"] for f in life["findings"]}


def test_a_redelivered_message_came_twice_under_one_message_id(examples_lakehouse) -> None:
    life = _life(examples_lakehouse, 150)
    assert _where(life["deliveries"]) == ["11:150", "11:150"]
    assert [d["delivery_index"] for d in life["deliveries"]] == [
        152,
        153,
    ]  # after ledger 10 (102) and the retried 100–104 (5)
    kinds = {f["kind"] for f in life["findings"]}
    assert "redelivered" in kinds and "duplicated" not in kinds


def test_an_unknown_message_names_what_was_asked(examples_lakehouse) -> None:
    with pytest.raises(InputError, match="no message with seq 5000 in run 'synthetic-faults'"):
        _life(examples_lakehouse, 5000)


def _outage_causes(lakehouse: Lakehouse) -> dict[str, list[str]]:
    rows = lakehouse.read("outages").collect()
    return {r.outage_id: [c.event_type for c in r.causes] for r in rows}


def test_as_of_answers_from_before_a_rerun_changed_gold(
    examples_lakehouse, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from jobs.analyze import analyze

    root = tmp_path / "lh"
    shutil.copytree(examples_lakehouse.config.lakehouse_path, root)
    config = load_config("local", lakehouse=str(root))
    lakehouse = Lakehouse(examples_lakehouse.spark, config)
    before_version = lakehouse.version("anomalies")
    before = _life(lakehouse, 51)
    causes_before = _outage_causes(lakehouse)  # the unload run's outages and their causes
    assert any(causes_before.values())

    write_late_receive(tmp_path / "late")  # a second subscription received seq 51
    # With a sink configured, analyze also raises and sends the alerts.
    sink = SinkConfig(name="file", file=FileSinkConfig(path=str(tmp_path / "alerts.jsonl")))
    with_sink = dataclasses.replace(config, alerts=AlertsConfig(sinks=[sink]))
    with caplog.at_level(logging.INFO, logger="pipelines.causes_job"):
        result = analyze(lakehouse, with_sink, tmp_path / "late")
    # Only the synthetic run was recomputed, so only its findings were ranked (the timeline is
    # the same); the unload run's outages keep their causes.
    assert "ranking the findings of 1 recomputed run(s) only" in caplog.text
    assert _outage_causes(lakehouse) == causes_before
    printed = io.StringIO()
    print_json(result, printed)  # as `analyze --json` prints it
    _validate(json.loads(printed.getvalue()), "analyze")
    sent = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert result["alerts"]["sinks"]["file"]["sent"] == result["alerts"]["raised"] == len(sent)
    assert {"run_not_valid", "lost"} <= {a["kind"] for a in sent}
    assert lakehouse.version("anomalies") > before_version
    now = _life(lakehouse, 51)
    assert [(d["subscription"], d["consumer"]) for d in now["deliveries"]] == [("late", "late-1")]
    # Still lost for reader-1; the new subscription's lost blocks do not hold seq 51.
    assert {f["subscription"] for f in now["findings"] if f["kind"] == "lost"} == {"reader-1"}
    assert now["as_of"]["versions"]["anomalies"] > before_version

    as_of = _life(lakehouse, 51, parse_as_of(lakehouse, str(before_version)))
    assert as_of["deliveries"] == [] == before["deliveries"]
    assert as_of["findings"] == before["findings"]
    assert as_of["as_of"]["versions"]["anomalies"] == before_version

    # The same through the command line, by version, as JSON (its entry point, in this process).
    argv = ("message", SYNTHETIC_RUN, "--seq", "51", "--as-of", str(before_version))
    code, printed, err = cli_in_process(lakehouse.spark, *argv, "--lakehouse", str(root), "--json")
    assert code == 0, err[-3000:]
    answer = json.loads(printed)
    _validate(answer, "message")
    assert answer["deliveries"] == []
    assert {f["subscription"] for f in answer["findings"] if f["kind"] == "lost"} == {"reader-1"}


def test_as_of_refuses_a_version_that_does_not_exist(examples_lakehouse) -> None:
    with pytest.raises(InputError, match="gold.anomalies has no version 999"):
        parse_as_of(examples_lakehouse, "999")
    with pytest.raises(InputError, match="expected a version number"):
        parse_as_of(examples_lakehouse, "yesterday")


def test_sql_names_tables_by_layer(examples_lakehouse) -> None:
    result = run_sql(
        examples_lakehouse,
        "SELECT a.kind, sum(a.count) AS n FROM gold.anomalies a "
        "JOIN silver.run_state s ON a.run_id = s.run_id "
        "WHERE a.run_id = 'synthetic-faults' GROUP BY a.kind ORDER BY a.kind",
        limit=100,
    )
    assert result["columns"] == ["kind", "n"]
    assert {r["kind"]: r["n"] for r in result["rows"]} == {
        "duplicated": 5, "lost": 3, "out_of_order": 1, "poll_skip": 4, "redelivered": 2,
        "unacked_received": 1,
    }  # fmt: skip
    assert result["truncated"] is False
    few = run_sql(examples_lakehouse, "SELECT seq FROM bronze.producer_events", limit=3)
    assert len(few["rows"]) == 3 and few["truncated"] is True
    with pytest.raises(InputError, match="the query cannot run"):
        run_sql(examples_lakehouse, "SELECT nope FROM gold.anomalies", limit=1)
