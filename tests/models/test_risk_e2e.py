"""`risk train` from the command line on a fresh lakehouse: it simulates and analyzes the default
sweep (made tiny here), trains, logs to MLflow, registers; then `risk score` on a ZooKeeper
capture writes gold.config_risk. Opt-in (`-m risk_e2e` or PULSAR_AUDIT_LONG_TESTS=1): it
simulates and analyzes runs, minutes on this machine."""

from __future__ import annotations

import json

import pytest
from test_risk_cli import run_json, validate

from jobs import training_runs

pytestmark = pytest.mark.risk_e2e

TINY_SWEEPS = {
    "tiny": {
        "scenario": ["control", "kill-bookie", "kill-bookies:2", "isolate-broker"],
        "config": ["2-2-1", "3-3-2"],
        "bookies": 5,
        "seed": 1,
    }
}


def _zk(path: str, decoded: dict | None = None, op: str = "snapshot") -> str:
    data = None if decoded is None else json.dumps(decoded)
    return json.dumps(
        {"ts": "2026-11-22T10:00:00.000+00:00", "zookeeper": "127.0.0.1:2181", "path": path,
         "op": op, "version": 0, "ephemeral_owner": 0, "data": data, "decoded": data,
         "capture_id": "c1", "observed_at": "2026-11-22T10:00:00.000+00:00"}
    )  # fmt: skip


def test_train_on_a_fresh_lakehouse_then_score_a_capture(
    spark, config, lakehouse, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(training_runs, "DEFAULT_SWEEPS", TINY_SWEEPS)
    monkeypatch.setattr(training_runs, "SWEEP_COMMON", {"messages": 60, "entries_per_ledger": 20,
                                               "ack_return_us": 1500})  # fmt: skip
    monkeypatch.setattr(training_runs, "REAL_RUNS", tmp_path / "no-real-runs")
    trained = run_json(capsys, "risk", "train", "--lakehouse", config.lakehouse)
    validate(trained, "risk_train")
    assert trained["prepared"]["simulated"]["runs"] == 8
    assert trained["prepared"]["note"].startswith("no simulated runs in the lakehouse")
    assert trained["run_features"] == {"recomputed": True, "runs": 8}
    assert trained["evaluation"]["real_runs"] == 0
    assert "(no real runs available)" in trained["evaluation"]["where"]
    assert trained["version"] == "1"
    assert trained["promoted"] == (trained["champion"] == "1")
    features = lakehouse.read("run_features").toPandas().set_index("run_id")
    assert set(features["source"]) == {"simulated"}
    killed = features[features["scenario"] == "kill-bookie"]
    # Qa = 1 cannot re-replicate after a lost bookie, Qa = 2 can (the auditor's logs say so)
    assert dict(zip(killed["ack_quorum"], killed["autorecovery_impossible"], strict=True)) == {
        1: True, 2: False}  # fmt: skip
    assert features.loc[features["scenario"] == "isolate-broker", "duplicates"].all()

    capture = tmp_path / "cluster.zk.jsonl"
    capture.write_text("\n".join([
        _zk("/admin/policies/public/default", {"persistence": {
            "bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1}}),
        _zk("/admin/policies/public/orders", {"deduplicationEnabled": True}),
        _zk("/ledgers/available/readonly"),
        *[_zk(f"/ledgers/available/bookie-{n}:3181") for n in range(3)],
    ]) + "\n")  # fmt: skip
    argv = ["risk", "score", "--capture", str(capture), "--faults", "none,kill-bookies:1"]
    scored = run_json(capsys, *argv, "--lakehouse", config.lakehouse)
    validate(scored, "risk_score")
    namespaces = {n["namespace"]: n for n in scored["namespaces"]}
    assert namespaces["public/default"]["policy_source"] == "namespace policy"
    assert namespaces["public/orders"]["policy_source"] == "broker default (assumed 2-2-2)"
    assert {n["bookies_available"] for n in namespaces.values()} == {3}
    assert scored["rows_written"] == 2 * 2 * 5  # namespaces × faults × labels
    rows = lakehouse.read("config_risk").filter("fault = 'kill-bookies:1'").collect()
    recovery = {r.namespace: r for r in rows if r.label == "autorecovery_impossible"}
    assert recovery["public/default"].explanation.startswith("Qa = 1: after 1 bookie")
    assert {r.model_version for r in rows} == {"1"}
    # scoring again replaces the cluster's rows: same count
    run_json(capsys, "risk", "score", "--lakehouse", config.lakehouse)
    assert lakehouse.read("config_risk").count() == 2 * 5 * 5  # default faults this time
