"""The gate, on MLflow's real local store: a model worse than the rules baseline is registered
but not promoted; a better one becomes `champion`; one no better than the champion does not
take its place; real runs are evaluated on and never trained on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from runs import runs

from models.evaluate import LABEL_MARGIN, gate, label_regressions, mean_brier
from models.model import ConfigRiskModel
from models.registry import CHAMPION, MODEL_NAME
from models.train import train_frame
from pulsar_audit.schemas import RISK_LABELS

VERSIONS = {"run_features": 3}
LOCATION = "/tmp/lakehouse/gold/run_features"


class ShuffledLabels(ConfigRiskModel):
    """The same model class trained on labels shuffled across runs: it can only learn the base
    rates, so it must lose to the rules of thumb."""

    def fit(self, frame: pd.DataFrame) -> ShuffledLabels:
        rng = np.random.default_rng(11)
        shuffled = frame.copy()
        for label in RISK_LABELS:
            shuffled[label] = rng.permutation(shuffled[label].to_numpy())
        return super().fit(shuffled)


def _client(config) -> MlflowClient:  # noqa: ANN001
    uri = config.mlflow_tracking_uri
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def _brier(result: dict, scorer: str) -> float:
    return mean_brier({r["label"]: {"brier": r[f"{scorer}_brier"]} for r in result["metrics"]})


def test_worse_than_the_baseline_is_not_promoted_and_better_is(config) -> None:
    frame = runs(seeds=2, noise=0.05)
    client = _client(config)

    worse = train_frame(frame, config, VERSIONS, LOCATION, model_factory=ShuffledLabels)
    assert _brier(worse, "candidate") > _brier(worse, "baseline")
    assert not worse["promoted"] and worse["champion"] is None
    assert worse["gate"].startswith("not promoted: mean Brier score")
    assert "does not beat the rules baseline" in worse["gate"]
    with pytest.raises(MlflowException):
        client.get_model_version_by_alias(MODEL_NAME, CHAMPION)
    registered = client.get_model_version(MODEL_NAME, worse["version"])
    assert registered.tags["gate"] == worse["gate"]  # why it was not promoted, on the version

    better = train_frame(frame, config, VERSIONS, LOCATION)
    assert _brier(better, "candidate") < _brier(better, "baseline")
    assert better["promoted"] and better["version"] == "2"
    assert str(client.get_model_version_by_alias(MODEL_NAME, CHAMPION).version) == "2"

    # Trained again on the same runs: no better than the champion, so the alias stays.
    again = train_frame(frame, config, VERSIONS, LOCATION)
    assert not again["promoted"] and "not the champion's" in again["gate"]
    assert str(client.get_model_version_by_alias(MODEL_NAME, CHAMPION).version) == "2"
    assert {"candidate_brier", "champion_brier", "baseline_brier"} <= set(again["metrics"][0])
    assert "| champion Brier | champion AUC |" in again["note"]


def test_real_runs_are_the_evaluation_and_never_trained_on(config) -> None:
    simulated = runs(seeds=1, noise=0.0)
    real = runs(seeds=1, noise=0.0, seed=5, source="real", prefix="real").head(12)
    result = train_frame(pd.concat([simulated, real]), config, VERSIONS, LOCATION)
    assert result["evaluation"] == {
        "where": "12 real runs (never trained on)",
        "real_runs": 12,
        "runs": 12,
    }
    assert result["training_runs"] == len(simulated)
    run = _client(config).get_run(result["mlflow_run_id"])
    assert run.data.params["training_runs"] == str(len(simulated))
    assert run.data.params["delta_version.run_features"] == "3"
    contexts = {
        i.tags[0].value: i.dataset.name for i in run.inputs.dataset_inputs
    }  # mlflow.data.context tag
    assert contexts == {
        "training": "gold.run_features (training)",
        "evaluation": "gold.run_features (evaluation)",
    }
    artifacts = {a.path for a in _client(config).list_artifacts(result["mlflow_run_id"])}
    assert {"reliability.png", "note.md", "features.json", "data_versions.json"} <= artifacts


def test_without_real_runs_the_hold_out_says_so(config) -> None:
    result = train_frame(runs(seeds=1), config, VERSIONS, LOCATION)
    assert result["evaluation"]["real_runs"] == 0
    assert "simulated hold-out" in result["evaluation"]["where"]
    assert "no real runs available" in result["note"]


def _metrics(**brier: tuple[float, int]) -> dict[str, dict]:
    """Per label: (Brier score, positive runs) on 10 evaluation runs."""
    return {
        label: {"runs": 10, "positives": positives, "brier": score}
        for label, (score, positives) in brier.items()
    }


def test_a_label_with_positives_worse_than_the_rules_by_the_margin_blocks_promotion() -> None:
    rules = _metrics(acked_loss=(0.10, 3), duplicates=(0.05, 2), outage_1s=(0.30, 4))
    # mean 0.1167 against the rules' 0.15, but duplicates (2 positive runs) 0.05 → 0.08
    worse = _metrics(acked_loss=(0.02, 3), duplicates=(0.08, 2), outage_1s=(0.25, 4))
    promoted, why = gate(worse, rules, None, "10 real runs (never trained on)")
    assert not promoted
    assert why == (
        "not promoted: mean Brier score 0.1167 beats the rules baseline's 0.1500, but a label "
        f"with positives is worse than the rules by more than {LABEL_MARGIN}: duplicates "
        "(Brier 0.0800 against the rules baseline's 0.0500, 2 of 10 runs positive) on 10 real "
        "runs (never trained on)"
    )
    # within the margin (0.05 → 0.065), or worse on a label with no positive run: promoted
    close = _metrics(acked_loss=(0.02, 3), duplicates=(0.065, 2), outage_1s=(0.25, 4))
    assert gate(close, rules, None, "10 real runs")[0]
    no_positives = {**worse, "duplicates": {"runs": 10, "positives": 0, "brier": 0.08}}
    rules_none = {**rules, "duplicates": {"runs": 10, "positives": 0, "brier": 0.05}}
    assert label_regressions(no_positives, rules_none) == []
    assert gate(no_positives, rules_none, None, "10 real runs")[0]
