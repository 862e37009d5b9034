"""The scoring jobs: read the champion (or the rules baseline), score, write gold.config_risk."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from models.score import (
    BASELINE_NAME,
    DEFAULT_POLICY,
    POLICY,
    Fault,
    cluster_settings,
    feature_rows,
    score_rows,
)
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import UsageError
from pulsar_audit.local_frames import local_frame
from pulsar_audit.schemas import CONFIG_RISK, conform

log = logging.getLogger(__name__)


@dataclass
class Scorer:
    """What scores: the champion's model, or (no champion yet) the newest version's baseline."""

    model: Any
    baseline: Any
    support: pd.DataFrame | None
    defaults: dict[str, Any]
    model_name: str
    model_version: str
    note: str


# What `risk score` reports of each namespace's persistence policy.
NAMESPACE_FIELDS = (
    "cluster",
    "namespace",
    "policy_source",
    "ensemble_size",
    "write_quorum",
    "ack_quorum",
    "bookies_available",
)


def load_scorer(config: Config) -> Scorer:
    """The champion; without one, the rules baseline of the newest registered version."""
    import mlflow

    from models import registry

    client, _ = registry.connect(config)
    current = registry.champion(client)
    if current is not None:
        p = current.pyfunc
        return Scorer(
            p.model, p.baseline, p.support, p.defaults, registry.MODEL_NAME, current.version, ""
        )
    try:
        versions = client.search_model_versions(f"name = '{registry.MODEL_NAME}'")
    except mlflow.exceptions.MlflowException:
        versions = []
    if not versions:
        raise UsageError(
            f"no model registered as {registry.MODEL_NAME} in {config.mlflow_tracking_uri}: "
            "run `pulsar-audit risk train` first"
        )
    newest = max(versions, key=lambda v: int(v.version))
    uri = f"models:/{registry.MODEL_NAME}/{newest.version}"
    p = mlflow.pyfunc.load_model(uri).unwrap_python_model()
    note = (
        f"no version of {registry.MODEL_NAME} passed the gate yet: scored by the rules baseline "
        f"fitted with version {newest.version}"
    )
    return Scorer(None, p.baseline, p.support, p.defaults, BASELINE_NAME, str(newest.version), note)


def score_clusters(
    lakehouse: Lakehouse, config: Config, faults: list[Fault], broker_default: tuple[int, int, int]
) -> dict[str, Any]:
    """Score every namespace of the newest ZooKeeper capture of each ensemble; replace those
    clusters' rows of gold.config_risk. Returns the `risk score --json` object."""
    settings = cluster_settings(lakehouse.read("zk_changes")).toPandas()  # one row per namespace
    if settings.empty:
        raise UsageError(
            "no namespace policies (/admin/policies/<tenant>/<namespace>) in bronze.zk_changes: "
            "capture the cluster's ZooKeeper first (`zk capture` or `zk dump`, then `ingest zk`, "
            "or `risk score --capture FILE`)"
        )
    scorer = load_scorer(config)
    default = "-".join(str(v) for v in broker_default)
    has_policy = settings["ensemble_size"].notna()
    settings["policy_source"] = [
        POLICY if p else DEFAULT_POLICY.format(default) for p in has_policy
    ]
    for column, value in zip(
        ("ensemble_size", "write_quorum", "ack_quorum"), broker_default, strict=True
    ):
        settings[column] = settings[column].fillna(value).astype(int)
    settings["bookies"] = settings["bookies"].fillna(0).astype(int)
    settings["bookies_available"] = settings["bookies"]
    rows = feature_rows(settings, faults, scorer.defaults)
    scored = score_rows(rows, scorer.model, scorer.baseline, scorer.support)
    scored_at = datetime.now(UTC)
    for row in scored:
        row.update(model_name=scorer.model_name, model_version=scorer.model_version)
        row["scored_at"] = scored_at
    written = _write(lakehouse, scored, sorted(set(settings["cluster"])))
    return {
        "model_name": scorer.model_name,
        "model_version": scorer.model_version,
        "note": scorer.note,
        "namespaces": [{k: r[k] for k in NAMESPACE_FIELDS} for r in settings.to_dict("records")],
        "rows_written": written,
        "scores": [_public(r) for r in scored],
    }


def what_if(config: Config, setting: dict[str, Any], faults: list[Fault]) -> dict[str, Any]:
    """Score one E/Qw/Qa setting with a number of bookies (and brokers) under each fault."""
    scorer = load_scorer(config)
    rows = feature_rows(pd.DataFrame([setting]), faults, scorer.defaults)
    if rows.empty:
        raise UsageError("no fault left to score: every --faults entry loses more bookies than E")
    scored = score_rows(rows, scorer.model, scorer.baseline, scorer.support)
    return {
        "model_name": scorer.model_name,
        "model_version": scorer.model_version,
        "note": scorer.note,
        "scores": [_public(r) for r in scored],
    }


PUBLIC = (
    "cluster",
    "namespace",
    "ensemble_size",
    "write_quorum",
    "ack_quorum",
    "bookies",
    "fault",
    "label",
    "risk",
    "baseline_risk",
    "explanation",
    "drivers",
    "runs",
    "failed_runs",
)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(row[k]) for k in PUBLIC if k in row}


def _plain(value: Any) -> Any:
    """numpy scalars → Python (for JSON)."""
    return value.item() if hasattr(value, "item") else value


def _write(lakehouse: Lakehouse, scored: list[dict[str, Any]], clusters: list[str]) -> int:
    spark = lakehouse.spark
    columns = CONFIG_RISK.fieldNames()
    records = [
        {**{c: _plain(r.get(c)) for c in columns}, "bookies_available": int(r["bookies"])}
        for r in scored
    ]
    frame = conform(local_frame(spark, records, CONFIG_RISK), CONFIG_RISK)
    return lakehouse.replace_where("config_risk", frame, {"cluster": clusters})
