"""The models' tests: per-run frames from tests/models/runs.py, MLflow's real store under
tmp_path (the SQLite tracking URI of conf/local.yaml, pointed at the test's lakehouse)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new SQLite tracking store with MLflow's tables created (its migrations take seconds:
    done once, then copied into each test's lakehouse)."""
    from mlflow import MlflowClient

    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    uri = f"sqlite:///{db}"
    MlflowClient(tracking_uri=uri, registry_uri=uri).search_experiments()
    return db


@pytest.fixture(autouse=True)
def mlflow_store(config, empty_mlflow_db: Path) -> Path:  # noqa: ANN001
    """This test's own store, where conf/local.yaml puts it: <lakehouse>/mlflow/mlflow.db."""
    db = Path(config.mlflow_tracking_uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(empty_mlflow_db, db)
    return db
