"""The models' tests: per-run frames from tests/models/runs.py, MLflow's real store under
tmp_path (the SQLite tracking URI of conf/local.yaml, pointed at the test's lakehouse)."""

from __future__ import annotations

import os
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


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001
    """`risk_e2e` tests run only when asked: `-m risk_e2e` or PULSAR_AUDIT_LONG_TESTS=1."""
    if os.environ.get("PULSAR_AUDIT_LONG_TESTS") == "1" or "risk_e2e" in (
        config.option.markexpr or ""
    ):
        return
    skip = pytest.mark.skip(
        reason="minutes long: run with -m risk_e2e or PULSAR_AUDIT_LONG_TESTS=1"
    )
    for item in items:
        if "risk_e2e" in item.keywords:
            item.add_marker(skip)
