"""Every command's --json output validates against docs/json-output.schema.json.

The commands run for real (Spark, Delta, the fixtures); the Pulsar ones that need no cluster
(status and down of an empty work dir) run too. `cluster up`, `capture run` and `chaos study`
need a real Pulsar: their outputs are checked in tests/capture/test_pulsar_capture.py;
`simulate run|sweep` in tests/simulate/test_simulate_cli.py; `risk` in tests/models.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import jsonschema
import pytest
from json_schema_check import SCHEMA, validate
from json_schema_check import cli_json as _json

from jobs.cli import main
from pulsar_audit.kinds import RUN_COUNTS

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("valid", ["true", "false", "True", None, 1])
def test_valid_is_a_json_boolean_or_unknown(valid):
    run = {
        "run_id": "r",
        "topic": "t",
        "subscription": "s",
        "subscription_type": None,
        **dict.fromkeys(RUN_COUNTS, 0),
        "unchecked": [],
    }
    for good in (True, False, "unknown"):
        validate({"runs": [{**run, "valid": good}], "outages": [], "anomalies": []}, "summary")
    with pytest.raises(jsonschema.ValidationError):
        validate({"runs": [{**run, "valid": valid}], "outages": [], "anomalies": []}, "summary")


def test_a_capture_s_chaos_is_none_one_outcome_or_a_list_of_several():
    capture = {"run_id": "r", "messages": 2, "acked": 2, "nacked": 0, "out": "o",
               "consume": {"consumer": "reader", "received": 2}}  # fmt: skip
    unload, wipe = {"action": "unload", "duration_s": 0.2}, {"action": "wipe-qw-bookies-disk"}
    for chaos in (None, unload, {"error": "ack count never reached 5"}, [unload, wipe]):
        validate({**capture, "chaos": chaos}, "capture_run")
    for bad in ([unload], "unload@5", [unload, "wipe"]):
        with pytest.raises(jsonschema.ValidationError):
            validate({**capture, "chaos": bad}, "capture_run")


def test_cluster_commands_without_a_cluster(capsys, tmp_path):
    workdir = str(tmp_path / "run")
    validate(_json(capsys, "cluster", "status", "--workdir", workdir), "cluster_status")
    validate(_json(capsys, "cluster", "down", "--workdir", workdir), "cluster_down")


def test_spark_commands(spark, capsys, tmp_path):
    lake = ["--lakehouse", str(tmp_path / "lakehouse")]
    validate(_json(capsys, "init", *lake), "init")
    folder = tmp_path / "in"
    (folder / "logs" / "client").mkdir(parents=True)
    shutil.copy(FIXTURES / "traces" / "run-a.jsonl", folder)
    shutil.copy(FIXTURES / "logs" / "client-unload.log", folder / "logs" / "client")
    traces = _json(capsys, "ingest", "traces", str(folder), *lake)
    validate(traces, "ingest_traces")
    logs = FIXTURES / "logs" / "versions" / "client-cpp-3.2-consumer.log"
    validate(_json(capsys, "ingest", "logs", str(logs), "--source", "client", *lake), "ingest_logs")
    analyzed = _json(capsys, "analyze", str(folder), *lake)
    validate(analyzed, "analyze")
    assert {run["valid"] for run in analyzed["runs"]} <= {True, False, "unknown"}
    validate(_json(capsys, "pipeline", *lake), "pipeline")
    validate(_json(capsys, "summary", *lake), "summary")
    validate(_json(capsys, "quarantine", "list", *lake), "quarantine_list")
    run_id = traces["runs"][0]
    validate(_json(capsys, "explain", run_id, *lake), "explain")
    validate(_json(capsys, "runs", "list", *lake), "runs_list")
    validate(_json(capsys, "compare", run_id, run_id, *lake), "compare")
    unmatched = _json(capsys, "logs", "unmatched", "--top", "5", *lake)
    validate(unmatched, "logs_unmatched")
    assert unmatched["templates"]

    # What people downstream use (issue 13): alerts, forensics, SQL, the HTML report.
    sent = _json(capsys, "alerts", "send", *lake)
    validate(sent, "alerts_send")
    listed = _json(capsys, "alerts", "list", *lake)
    validate(listed, "alerts_list")
    assert sent["sinks"] == {} and sent["raised"] == len(listed["alerts"]) >= 1
    life = _json(capsys, "message", run_id, "--seq", "1", *lake)
    validate(life, "message")
    assert (life["message"]["seq"], life["producer_events"][0]["event"]) == (1, "send")
    query = _json(capsys, "sql", "SELECT run_id, valid FROM gold.run_summary", *lake)
    validate(query, "sql")
    assert query["columns"] == ["run_id", "valid"] and query["truncated"] is False
    report = _json(capsys, "report", run_id, "--out", str(tmp_path / "r.html"), *lake)
    validate(report, "report")
    [run] = analyzed["runs"]
    assert (report["verdict"], report["run_id"]) == (run["valid"], run_id) and report["points"] >= 1


def test_zk_capture_help_is_a_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["zk", "capture", "--help"])
    assert exit_.value.code == 0
    assert "--zookeeper HOST:PORT" in capsys.readouterr().out


def test_run_rows_of_the_schema_are_the_run_summary_columns():
    """The documented run row and gold.run_summary's counts never drift apart."""
    from pulsar_audit.schemas import RUN_SUMMARY
    from serve.summary import RUN_FIELDS

    item = SCHEMA["$defs"]["run"]
    assert set(item["properties"]) == set(RUN_FIELDS)
    columns = [f.name for f in RUN_SUMMARY.fields]
    assert [c for c in columns if c in RUN_COUNTS] == list(RUN_COUNTS)


def _json_commands(parser, words: tuple[str, ...] = ()) -> list[str]:
    """Every command line that takes --json, as its $defs name (spaces as underscores)."""
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        takes_json = any("--json" in action.option_strings for action in parser._actions)
        return ["_".join(words)] if takes_json else []
    return [
        name
        for sub in subs
        for word, child in sub.choices.items()
        for name in _json_commands(child, (*words, word))
    ]


def test_every_command_with_json_has_a_schema_entry():
    from jobs.cli import build_parser

    commands = _json_commands(build_parser())
    # `cluster ACTION` is one parser: one entry per action
    commands = [c for c in commands if c != "cluster"] + ["cluster_up", "cluster_status"]
    commands.append("cluster_down")
    assert len(commands) > 20
    missing = sorted(c for c in commands if c not in SCHEMA["$defs"])
    assert missing == [], f"--json outputs with no entry in docs/json-output.schema.json: {missing}"
