"""`risk train | score | what-if` from the command line, with --json checked against
docs/json-output.schema.json; MLflow's real store under tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from json_schema_check import cli_json as run_json
from json_schema_check import validate
from runs import runs
from test_gate import LOCATION, VERSIONS, ShuffledLabels

from jobs.cli import main
from models.train import train_frame


def _by(scores: list[dict], fault: str, label: str) -> dict:
    [found] = [s for s in scores if s["fault"] == fault and s["label"] == label]
    return found


def test_what_if_before_training_says_what_to_run(config, capsys) -> None:
    capsys.readouterr()
    code = main(["risk", "what-if", "--config", "3-2-1", "--bookies", "5",
                 "--lakehouse", config.lakehouse])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "run `pulsar-audit risk train` first" in err
    # the store as MLflow takes it: sqlite:/// and the absolute path (four slashes)
    assert config.mlflow_tracking_uri.startswith("sqlite:////")
    assert f"in {config.mlflow_tracking_uri}: run" in err


def test_risk_help_says_how_to_open_the_mlflow_ui(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["risk", "--help"])
    assert done.value.code == 0
    words = " ".join(capsys.readouterr().out.split())  # argparse wraps the description
    assert "mlflow.tracking_uri" in words
    assert "`mlflow ui --backend-store-uri sqlite:///<lakehouse>/mlflow/mlflow.db`" in words


def test_what_if_text_names_the_store_and_how_to_open_its_ui(config, capsys) -> None:
    train_frame(runs(seeds=1), config, VERSIONS, LOCATION)
    capsys.readouterr()
    code = main(["risk", "what-if", "--config", "2-2-1", "--bookies", "3",
                 "--faults", "kill-bookie", "--lakehouse", config.lakehouse])  # fmt: skip
    assert code == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("MLflow UI on this store: ")
    assert last.endswith(f"mlflow ui --backend-store-uri {config.mlflow_tracking_uri}")


def test_train_with_too_few_simulated_runs_stops_before_the_real_runs(
    spark, config, tmp_path: Path, capsys
) -> None:
    lakehouse = ["--lakehouse", config.lakehouse]
    simulated = tmp_path / "simulated"
    argv = ["simulate", "run", "--scenario", "control", "--messages", "100", "--out"]
    assert main([*argv, str(simulated), *lakehouse]) == 0
    assert main(["analyze", str(simulated), *lakehouse]) == 0
    real = tmp_path / "real-runs"  # the data set's layout; its archive is never opened
    real.mkdir()
    (real / "manifest.jsonl").write_text(json.dumps({"archive": "run-1.tar.gz"}) + "\n")
    capsys.readouterr()

    assert main(["risk", "train", "--real-runs", str(real), *lakehouse]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "1 simulated run(s) to train on; need at least 4" in err
    assert "`pulsar-audit simulate sweep --grid examples/risk-training-grid.yaml --out DIR`" in err
    assert not (Path(config.lakehouse) / "inputs" / "real-runs").exists()


def test_what_if_scores_one_setting_with_the_champion(config, capsys) -> None:
    train_frame(runs(seeds=2), config, VERSIONS, LOCATION)
    argv = ["risk", "what-if", "--config", "3-2-1", "--bookies", "5",
            "--faults", "kill-bookies:2,kill-broker", "--lakehouse", config.lakehouse]  # fmt: skip
    result = run_json(capsys, *argv)
    validate(result, "risk_what-if")
    assert (result["model_name"], result["model_version"], result["note"]) == (
        "pulsar-audit-config-risk", "1", "")  # fmt: skip
    assert {s["fault"] for s in result["scores"]} == {"kill-bookies:2", "kill-broker"}
    unreadable = _by(result["scores"], "kill-bookies:2", "unreadable")
    assert unreadable["explanation"].startswith(
        "Qw = 2: 2 bookies lost can hold every copy of an entry (rule: Qw > n to survive n lost "
        "bookies); E = 3 > Qw stripes entries"
    )
    assert unreadable["risk"] > 0.5
    recovery = _by(result["scores"], "kill-bookies:2", "autorecovery_impossible")
    assert recovery["explanation"].startswith("Qa = 1: after 2 bookies of this ensemble are lost")
    outage = _by(result["scores"], "kill-broker", "outage_1s")
    assert outage["risk"] > 0.5 > _by(result["scores"], "kill-bookies:2", "outage_1s")["risk"]


def test_what_if_with_no_promoted_version_uses_the_rules_baseline(config, capsys) -> None:
    worse = train_frame(runs(seeds=1), config, VERSIONS, LOCATION, model_factory=ShuffledLabels)
    assert not worse["promoted"]
    argv = ["risk", "what-if", "--config", "2-2-1", "--bookies", "3",
            "--faults", "kill-bookie", "--lakehouse", config.lakehouse]  # fmt: skip
    result = run_json(capsys, *argv)
    validate(result, "risk_what-if")
    assert result["model_name"] == "rules-baseline"
    assert result["note"].startswith("no version of pulsar-audit-config-risk passed the gate yet")
    recovery = _by(result["scores"], "kill-bookie", "autorecovery_impossible")
    assert recovery["risk"] == recovery["baseline_risk"]


@pytest.mark.pulsar
def test_score_the_namespaces_of_a_live_capture(
    standalone, config, lakehouse, tmp_path, capsys
) -> None:
    """A real Pulsar: set a namespace's persistence, dump its ZooKeeper, score what it holds."""
    from capture.admin import Admin, TopicName
    from capture.zk_capture import dump

    admin = Admin(standalone.admin_url)
    admin.set_persistence(TopicName.parse("persistent://public/default/risk-probe"), 1, 1, 1)
    zookeeper = next(s for s in standalone.processes if "zookeeper" in s.ports).ports["zookeeper"]
    capture = tmp_path / "live.zk.jsonl"
    assert dump(f"127.0.0.1:{zookeeper}", capture) > 0
    train_frame(runs(seeds=2), config, VERSIONS, LOCATION)

    argv = ["risk", "score", "--capture", str(capture), "--faults", "none,kill-bookies:1",
            "--lakehouse", config.lakehouse]  # fmt: skip
    result = run_json(capsys, *argv)
    validate(result, "risk_score")
    seen = {n["namespace"]: n for n in result["namespaces"]}
    assert seen["public/default"]["policy_source"] == "namespace policy"
    assert (seen["public/default"]["ensemble_size"], seen["public/default"]["bookies_available"]) \
        == (1, 1)  # fmt: skip
    rows = result["rows_written"]
    assert rows == len(result["scores"]) == len(seen) * 2 * 5  # namespaces × faults × labels
    table = lakehouse.read("config_risk")
    assert table.count() == rows
    unreadable = table.filter("namespace = 'public/default' AND fault = 'kill-bookies:1' "
                              "AND label = 'unreadable'").first()  # fmt: skip
    assert unreadable.explanation.startswith("Qw = 1: 1 bookie lost can hold every copy")
