"""MLflow: the experiment, one run per training, the registered model and its `champion` alias.

The tracking URI is the config's (`mlflow.tracking_uri`: a SQLite file under the lakehouse
locally, the workspace's own on Databricks). Artifacts of a local SQLite store live beside it
(`<lakehouse>/mlflow/artifacts`), never in the working directory.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import mlflow.pyfunc
import pandas as pd
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from models.frame import RAW_FEATURES, typed
from pulsar_audit.config import Config

log = logging.getLogger(__name__)

MODEL_NAME = "pulsar-audit-config-risk"
CHAMPION = "champion"
ARTIFACT_NAME = "config-risk"
SQLITE = "sqlite:///"


class RiskPyfunc(mlflow.pyfunc.PythonModel):
    """The registered model: raw features in, one probability per label out.

    It carries the rules baseline fitted on the same runs and how many training runs each
    setting and fault had, so that a score can say what it rests on.
    """

    def __init__(self, model: Any, baseline: Any, support: pd.DataFrame, defaults: dict):
        self.model = model
        self.baseline = baseline
        self.support = support
        self.defaults = defaults

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict | None = None):  # noqa: ANN201
        return self.model.predict_proba(typed(model_input))


@dataclass
class Champion:
    version: str
    pyfunc: RiskPyfunc


def connect(config: Config) -> tuple[MlflowClient, str]:
    """Point MLflow at the config's store and return (client, experiment id)."""
    uri = config.mlflow_tracking_uri
    artifacts = None
    if uri.startswith(SQLITE):
        db = Path(uri[len(SQLITE) :])
        db.parent.mkdir(parents=True, exist_ok=True)
        artifacts = (db.parent / "artifacts").resolve().as_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    found = client.get_experiment_by_name(config.mlflow.experiment)
    if found is not None:
        return client, found.experiment_id
    return client, client.create_experiment(config.mlflow.experiment, artifact_location=artifacts)


def champion(client: MlflowClient) -> Champion | None:
    """The version the `champion` alias points to, loaded; None when there is none."""
    try:
        version = client.get_model_version_by_alias(MODEL_NAME, CHAMPION)
    except MlflowException:
        return None
    loaded = mlflow.pyfunc.load_model(f"models:/{MODEL_NAME}@{CHAMPION}")
    return Champion(str(version.version), loaded.unwrap_python_model())


def requirements() -> list[str]:
    """What loading the model needs (given, so MLflow does not load it again to guess)."""
    from importlib.metadata import version

    packages = ("mlflow", "scikit-learn", "pandas", "numpy")
    return [f"{name}=={version(name)}" for name in packages] + ["pulsar-audit"]


def log_model(pyfunc: RiskPyfunc, example: pd.DataFrame) -> str:
    """Log and register the model in the active run; return the new version."""
    from mlflow.models import infer_signature

    example = typed(example)[list(RAW_FEATURES)]
    with warnings.catch_warnings():  # the integer columns are filled before scoring: no NaN
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer")
        signature = infer_signature(example, pyfunc.model.predict_proba(example))
    info = mlflow.pyfunc.log_model(
        name=ARTIFACT_NAME,
        python_model=pyfunc,
        signature=signature,
        input_example=example,
        registered_model_name=MODEL_NAME,
        pip_requirements=requirements(),
    )
    return str(info.registered_model_version)


def promote(client: MlflowClient, version: str, why: str, promoted: bool) -> None:
    """Record the gate's decision on the version; move `champion` to it only if it passed."""
    client.set_model_version_tag(MODEL_NAME, version, "gate", why)
    if promoted:
        client.set_registered_model_alias(MODEL_NAME, CHAMPION, version)
