"""`pulsar-audit risk train | score | what-if`: which E/Qw/Qa settings are risky."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from jobs.context import EXIT_OK, Context
from pulsar_audit.output import format_table

SCORE_COLUMNS = ["namespace", "fault", "label", "risk", "baseline_risk", "explanation"]
MLFLOW_UI = "ui --backend-store-uri"


def mlflow_ui_line(tracking_uri: str) -> str:
    """How to open MLflow's UI on the store (a local one; Databricks has its own UI)."""
    if tracking_uri == "databricks":
        return "MLflow: the runs and models are in the Databricks workspace's UI"
    beside = Path(sys.executable).parent / "mlflow"  # the mlflow installed with pulsar-audit
    mlflow = str(beside) if beside.exists() else shutil.which("mlflow") or "mlflow"
    return f"MLflow UI on this store: {mlflow} {MLFLOW_UI} {tracking_uri}"


def _faults(text: str | None):  # noqa: ANN202 - list[Fault]
    from models.score import DEFAULT_FAULTS, parse_fault

    specs = [s for s in (text.split(",") if text else DEFAULT_FAULTS) if s.strip()]
    return [parse_fault(s) for s in specs]


def cmd_train(ctx: Context) -> int:
    from jobs.training_runs import prepare_training_runs
    from models.train import train

    prepared = prepare_training_runs(ctx)
    result = train(ctx.lakehouse, ctx.config)
    result["prepared"] = prepared
    ctx.emit(result, _train_text)
    return EXIT_OK


def _train_text(result: dict[str, Any]) -> str:
    prepared = result.get("prepared") or {}
    lines = [line for line in (prepared.get("note"),) if line]
    lines += [
        f"{result['model_name']} version {result['version']} "
        f"({result['training_runs']} training runs; MLflow run {result['mlflow_run_id']} in "
        f"{result['tracking_uri']})",
        result["note"].rstrip(),
        f"champion: version {result['champion']}" if result["champion"] else "no champion",
        mlflow_ui_line(result["tracking_uri"]),
    ]
    return "\n".join(lines)


def cmd_score(ctx: Context) -> int:
    from jobs.training_runs import ingest_zk
    from models.score import parse_config
    from models.scoring_job import score_clusters

    if ctx.args.capture:
        ingest_zk(ctx, ctx.args.capture)
    default = parse_config(ctx.args.broker_default)
    result = score_clusters(ctx.lakehouse, ctx.config, _faults(ctx.args.faults), default)
    ctx.emit(result, _score_text)
    return EXIT_OK


def _score_text(result: dict[str, Any]) -> str:
    head = f"scored by {result['model_name']} version {result['model_version']}"
    lines = [head, result["note"]] if result["note"] else [head]
    from models.scoring_job import NAMESPACE_FIELDS

    lines.append(format_table(result["namespaces"], list(NAMESPACE_FIELDS)))
    lines.append(_scores_table(result["scores"]))
    lines.append(f"{result['rows_written']} rows written to gold.config_risk")
    return "\n".join(lines)


def _scores_table(scores: list[dict[str, Any]]) -> str:
    rows = [{**s, "risk": f"{s['risk']:.2f}", "baseline_risk": f"{s['baseline_risk']:.2f}"}
            for s in scores]  # fmt: skip
    columns = [c for c in SCORE_COLUMNS if not rows or c in rows[0]]
    return format_table(rows, columns)


def cmd_what_if(ctx: Context) -> int:
    from models.score import parse_config
    from models.scoring_job import what_if

    e, qw, qa = parse_config(ctx.args.config)
    setting = {
        "ensemble_size": e,
        "write_quorum": qw,
        "ack_quorum": qa,
        "bookies": ctx.args.bookies,
        "brokers": ctx.args.brokers,
        "deduplication": ctx.args.dedup,
    }
    result = what_if(ctx.config, setting, _faults(ctx.args.faults))
    result["setting"] = {**setting, "config": ctx.args.config}
    uri = ctx.config.mlflow_tracking_uri
    ctx.emit(result, lambda r: f"{_what_if_text(r)}\n{mlflow_ui_line(uri)}")
    return EXIT_OK


def _what_if_text(result: dict[str, Any]) -> str:
    s = result["setting"]
    head = (
        f"E-Qw-Qa {s['config']} with {s['bookies']} bookies, scored by {result['model_name']} "
        f"version {result['model_version']}"
    )
    lines = [head, result["note"]] if result["note"] else [head]
    return "\n".join([*lines, _scores_table(result["scores"])])


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    risk = sub.add_parser(
        "risk",
        help="which E/Qw/Qa settings are risky (models, MLflow)",
        description="Train, score and ask what-if about E/Qw/Qa settings. Models, runs and "
        f"metrics are in MLflow's store, conf key mlflow.tracking_uri; open its UI with "
        f"`mlflow {MLFLOW_UI} sqlite:///<lakehouse>/mlflow/mlflow.db` (the local env's "
        "store; `risk train` and `risk what-if` print the command with the real URI).",
    )
    kinds = risk.add_subparsers(dest="kind", metavar="KIND", required=True)
    train = kinds.add_parser(
        "train",
        parents=[common],
        help="train per-label calibrated models on gold.run_features; register; gate",
        description="Rebuild gold.run_features, train one calibrated classifier per risk label "
        "on the simulated runs, evaluate it beside the rules baseline and the current champion "
        "on the real runs (a simulated hold-out when there are none, and it says so), log "
        "everything to MLflow, register a version of pulsar-audit-config-risk and move the "
        "alias `champion` to it only when it beats both on Brier score. On a lakehouse with no "
        "runs, a default sweep is simulated and analyzed first.",
    )
    train.add_argument(
        "--real-runs",
        metavar="DIR",
        help="real runs to evaluate on (a folder of captures, or the data set's manifest.jsonl "
        "and *.tar.gz); default: data/real-runs when it exists",
    )
    train.set_defaults(handler=cmd_train)
    score = kinds.add_parser(
        "score",
        parents=[common],
        help="score each namespace's E/Qw/Qa in the ZooKeeper captures into gold.config_risk",
        description="For each ZooKeeper ensemble captured, the newest capture's namespaces "
        "(their persistence policy: E/Qw/Qa) and bookies are scored by the champion under "
        "each fault; one row per (namespace, fault, label) replaces the cluster's rows in "
        "gold.config_risk, with the probability and what drives it in words.",
    )
    score.add_argument("--capture", metavar="PATH", help="ingest this ZooKeeper capture first")
    score.add_argument(
        "--faults",
        metavar="LIST",
        help="comma-separated faults (default none,kill-bookies:1,kill-bookies:2,kill-broker,"
        "isolate-broker)",
    )
    score.add_argument(
        "--broker-default",
        default="2-2-2",
        metavar="E-Qw-Qa",
        help="E-Qw-Qa assumed for a namespace without a persistence policy (default 2-2-2, "
        "broker.conf's managedLedgerDefault*)",
    )
    score.set_defaults(handler=cmd_score)
    what = kinds.add_parser(
        "what-if",
        parents=[common],
        help="score one E/Qw/Qa setting under faults (writes nothing)",
        description="Score E-Qw-Qa with BOOKIES bookies under each fault, by the champion.",
    )
    what.add_argument("--config", required=True, metavar="E-Qw-Qa", help="e.g. 3-2-1")
    what.add_argument("--bookies", type=int, required=True, help="bookies available")
    what.add_argument("--brokers", type=int, default=3, help="brokers (default 3)")
    what.add_argument("--dedup", action="store_true", help="broker deduplication on")
    what.add_argument(
        "--faults", metavar="LIST", help="comma-separated, e.g. kill-bookies:2 (default: all)"
    )
    what.set_defaults(handler=cmd_what_if)
