"""`risk train`: gold.run_features → per-label calibrated models → MLflow, through the gate.

Training runs are the simulated ones; evaluation runs are the real ones, which never enter
training. Without real runs the evaluation (and so the gate) uses a stable hold-out of the
simulated runs, and every output says so.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from models.evaluate import evaluate, gate, reliability_figure, side_by_side
from models.features import build_run_features
from models.frame import RAW_FEATURES, complete, held_out
from models.model import ConfigRiskModel
from models.rules_of_thumb import RulesBaseline
from pulsar_audit.config import Config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.errors import InputError
from pulsar_audit.schemas import RISK_LABELS

log = logging.getLogger(__name__)

FEATURES_VERSION = "run-features-2"
FEATURE_INPUTS = (
    "run_events",
    "run_files",
    "message_history",
    "run_summary",
    "anomalies",
    "outages",
    "infra_events",
)
MIN_TRAINING_RUNS = 4
GET_TRAINING_RUNS = (
    "`pulsar-audit simulate sweep --grid examples/risk-training-grid.yaml --out DIR`, "
    "then `pulsar-audit analyze DIR`"
)
NO_REAL_RUNS = "no real runs available"


def refresh_run_features(lakehouse: Lakehouse) -> dict[str, Any]:
    """Rebuild gold.run_features when one of its inputs changed; report the rows it holds."""
    versions = lakehouse.versions(FEATURE_INPUTS)
    fingerprint = hashlib.sha256(f"{FEATURES_VERSION};{sorted(versions.items())}".encode())
    fingerprint = fingerprint.hexdigest()
    if lakehouse.stage_is_current("run_features", fingerprint):
        return {"recomputed": False, "runs": lakehouse.read("run_features").count()}
    rows = build_run_features(*(lakehouse.read(table) for table in FEATURE_INPUTS))
    written = lakehouse.overwrite("run_features", rows)
    lakehouse.record_stage("run_features", fingerprint)
    log.info("gold.run_features: %d runs", written)
    return {"recomputed": True, "runs": written}


def count_runs(lakehouse: Lakehouse) -> int:
    """Runs with a verdict in gold (what training can learn from)."""
    return lakehouse.read("run_summary").select("run_id").distinct().count()


def split(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(training runs, evaluation runs, where the evaluation comes from, in words)."""
    frame = complete(frame)
    real = frame[frame["source"] == "real"]
    simulated = frame[frame["source"] == "simulated"]
    if len(real):
        return simulated, real, f"{len(real)} real runs (never trained on)"
    hold = simulated["run_id"].map(held_out).astype(bool)
    where = f"a simulated hold-out of {int(hold.sum())} runs ({NO_REAL_RUNS})"
    return simulated[~hold], simulated[hold], where


def support(train: pd.DataFrame) -> pd.DataFrame:
    """Training runs per (E, Qw, Qa, fault kind, bookies lost), with how many had each label."""
    keys = ["ensemble_size", "write_quorum", "ack_quorum", "fault_kind", "fault_bookies"]
    labels = train[list(RISK_LABELS)].fillna(False).astype(int)
    grouped = pd.concat([train[keys], labels], axis=1).groupby(keys, as_index=False)
    counted = grouped.sum()
    counted["runs"] = grouped.size()["size"]
    return counted


def defaults(train: pd.DataFrame) -> dict[str, Any]:
    """What a score assumes for the features a ZooKeeper capture cannot show."""
    duration = train.groupby("fault_kind")["fault_duration_s"].median().to_dict()
    return {
        "in_flight_max": int(train["in_flight_max"].median()) if len(train) else 1000,
        "brokers": int(train["brokers"].median()) if len(train) else 3,
        "fault_duration_s": {k: float(v) for k, v in duration.items()},
    }


ModelFactory = Callable[[], Any]


def train(
    lakehouse: Lakehouse, config: Config, model_factory: ModelFactory = ConfigRiskModel
) -> dict[str, Any]:
    """Refresh gold.run_features, then train, evaluate, log, register and gate on it."""
    features = refresh_run_features(lakehouse)
    frame = lakehouse.read("run_features").toPandas()  # one row per run
    versions = lakehouse.versions(("run_features", *FEATURE_INPUTS))
    location = lakehouse.location("run_features")
    result = train_frame(frame, config, versions, location, model_factory)
    return {**result, "run_features": features}


def train_frame(
    frame: pd.DataFrame,
    config: Config,
    versions: dict[str, int],
    location: str,
    model_factory: ModelFactory = ConfigRiskModel,
) -> dict[str, Any]:
    """Train on the simulated runs of `frame` (gold.run_features as pandas), evaluate beside the
    rules baseline and the champion, log everything to MLflow, register a version; gate.

    versions: the Delta versions of the tables the frame was read from (logged with the run);
    location: where gold.run_features lives.
    """
    import mlflow
    import mlflow.data
    from mlflow.data.delta_dataset_source import DeltaDatasetSource

    from models import registry

    training, evaluation, where = split(frame)
    if len(training) < MIN_TRAINING_RUNS:
        raise InputError(
            f"{len(training)} simulated runs to train on; need at least {MIN_TRAINING_RUNS} "
            f"(gold.run_features has {len(frame)} runs): simulate and analyze more runs "
            f"({GET_TRAINING_RUNS})"
        )
    candidate = model_factory().fit(training)
    baseline = RulesBaseline().fit(training)
    client, experiment = registry.connect(config)
    try:
        current, unloadable = registry.champion(client), None
    except (ImportError, AttributeError, TypeError) as exc:
        # a champion pickled by code that has changed since: say so, compare with the rules only
        current, unloadable = None, f"{type(exc).__name__}: {exc}"
    predicted = {
        "candidate": candidate.predict_proba(evaluation),
        "baseline": baseline.predict_proba(evaluation),
    }
    metrics = {
        "candidate": evaluate(candidate, evaluation),
        "baseline": evaluate(baseline, evaluation),
    }
    if current is not None:
        predicted["champion"] = current.pyfunc.model.predict_proba(evaluation)
        metrics["champion"] = evaluate(current.pyfunc.model, evaluation)
    promoted, why = gate(metrics["candidate"], metrics["baseline"], metrics.get("champion"), where)
    if unloadable:
        why += f"; the current champion could not be loaded ({unloadable}) and was not compared"
    table = side_by_side(metrics)
    started = datetime.now(UTC)
    with mlflow.start_run(
        experiment_id=experiment, run_name=f"config-risk {started:%Y%m%dT%H%M%S}"
    ):
        mlflow.log_params(
            {
                "model": candidate.name,
                "labels": ",".join(RISK_LABELS),
                "training_runs": len(training),
                "evaluation_runs": len(evaluation),
                "evaluation": where,
                "real_runs": int((evaluation["source"] == "real").sum()),
                "per_label": candidate.describe()[:6000],
                "baseline": baseline.describe()[:6000],
                **{f"delta_version.{t}": v for t, v in versions.items()},
            }
        )
        mlflow.log_dict(
            {"raw_features": list(RAW_FEATURES), "design": candidate.features}, "features.json"
        )
        mlflow.log_dict({"delta_versions": versions, "location": location}, "data_versions.json")
        for context, rows in (("training", training), ("evaluation", evaluation)):
            source = DeltaDatasetSource(path=location, delta_table_version=versions["run_features"])
            dataset = mlflow.data.from_pandas(
                rows[["run_id", "source", *RAW_FEATURES, *RISK_LABELS]],
                source=source,
                name=f"gold.run_features ({context})",
            )
            mlflow.log_input(dataset, context=context)
        mlflow.log_metrics(_flat_metrics(metrics))
        figure = reliability_figure(evaluation, predicted, where)
        mlflow.log_figure(figure, "reliability.png")
        note = render_note(table, why, where)
        mlflow.log_text(note, "note.md")
        pyfunc = registry.RiskPyfunc(candidate, baseline, support(training), defaults(training))
        example = evaluation.head(2) if len(evaluation) else training.head(2)
        version = registry.log_model(pyfunc, example)
        registry.promote(client, version, why, promoted)
        mlflow.set_tags({"gate": "promoted" if promoted else "not promoted", "gate_reason": why})
        run_id = mlflow.active_run().info.run_id
    return {
        "experiment": config.mlflow.experiment,
        "tracking_uri": config.mlflow_tracking_uri,
        "mlflow_run_id": run_id,
        "model_name": registry.MODEL_NAME,
        "version": version,
        "promoted": promoted,
        "champion": version if promoted else (current.version if current else None),
        "gate": why,
        "evaluation": {
            "where": where,
            "real_runs": int((evaluation["source"] == "real").sum()),
            "runs": len(evaluation),
        },
        "training_runs": len(training),
        "metrics": table,
        "note": note,
    }


def _flat_metrics(metrics: dict[str, dict[str, dict[str, Any]]]) -> dict[str, float]:
    flat = {}
    for scorer, per_label in metrics.items():
        for label, values in per_label.items():
            for name in ("brier", "log_loss", "roc_auc"):
                if values.get(name) is not None:
                    flat[f"{scorer}.{label}.{name}"] = values[name]
    return flat


def render_note(table: list[dict[str, Any]], why: str, where: str) -> str:
    """The champion's (or candidate's) and the rules baseline's Brier and AUC, side by side."""
    scorers = [s for s in ("candidate", "champion", "baseline") if f"{s}_brier" in table[0]]
    head = ["label", "runs"] + [f"{s} {m}" for s in scorers for m in ("Brier", "AUC")]
    lines = [f"Evaluated on {where}.", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for row in table:
        cells = [row["label"], str(row.get("runs") or 0)]
        for scorer in scorers:
            cells += [_cell(row.get(f"{scorer}_brier")), _cell(row.get(f"{scorer}_auc"))]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", why]
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
