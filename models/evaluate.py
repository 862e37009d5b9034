"""Scoring scorers on evaluation runs: Brier score, log loss, ROC-AUC, reliability, the gate."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
import pandas as pd
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from models.frame import LABEL_TEXT, label_rows
from pulsar_audit.schemas import RISK_LABELS

RELIABILITY_BINS = 5


class Scorer(Protocol):
    name: str

    def predict_proba(self, frame: pd.DataFrame) -> pd.DataFrame: ...


def label_metrics(y: np.ndarray, p: np.ndarray) -> dict[str, Any]:
    """Brier score, log loss and ROC-AUC of probabilities `p` for 0/1 outcomes `y`.

    AUC needs both outcomes among the runs: None when they are all alike.
    """
    if len(y) == 0:
        return {"runs": 0, "positives": 0, "brier": None, "log_loss": None, "roc_auc": None}
    p = np.clip(p, 1e-6, 1 - 1e-6)
    both = 0 < y.sum() < len(y)
    return {
        "runs": int(len(y)),
        "positives": int(y.sum()),
        "brier": float(brier_score_loss(y, p)),
        "log_loss": float(log_loss(y, p, labels=[0, 1])),
        "roc_auc": float(roc_auc_score(y, p)) if both else None,
    }


def evaluate(scorer: Scorer, frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per label: the scorer's metrics on the runs of `frame` whose label is known."""
    predicted = scorer.predict_proba(frame)
    metrics = {}
    for label in RISK_LABELS:
        known, y = label_rows(frame, label)
        metrics[label] = label_metrics(y, predicted.loc[known.index, label].to_numpy())
    return metrics


def mean_brier(metrics: dict[str, dict[str, Any]]) -> float | None:
    """The Brier score averaged over the labels that have evaluation runs."""
    scores = [m["brier"] for m in metrics.values() if m.get("brier") is not None]
    return float(np.mean(scores)) if scores else None


# A label with positives among the evaluation runs may not score worse than the rules baseline
# by more than this (Brier score, absolute): a better mean must not hide one label gone bad.
LABEL_MARGIN = 0.02


def label_regressions(
    candidate: dict[str, dict[str, Any]],
    baseline: dict[str, dict[str, Any]],
    margin: float = LABEL_MARGIN,
) -> list[str]:
    """The labels with positive evaluation runs whose candidate Brier score exceeds the rules
    baseline's by more than `margin`, in words."""
    worse = []
    for label, ours in candidate.items():
        rules = baseline.get(label, {})
        if not ours.get("positives") or ours.get("brier") is None or rules.get("brier") is None:
            continue
        if ours["brier"] > rules["brier"] + margin:
            worse.append(
                f"{label} (Brier {ours['brier']:.4f} against the rules baseline's "
                f"{rules['brier']:.4f}, {ours['positives']} of {ours['runs']} runs positive)"
            )
    return worse


def gate(
    candidate: dict[str, dict[str, Any]],
    baseline: dict[str, dict[str, Any]],
    champion: dict[str, dict[str, Any]] | None,
    where: str,
) -> tuple[bool, str]:
    """Promote only a candidate whose mean Brier score (over the labels) is strictly lower than
    the rules baseline's and the current champion's, on the same evaluation runs, and which
    on no label with positive evaluation runs scores worse than the rules baseline by more
    than LABEL_MARGIN.

    Returns (promote, why in words).
    """
    ours, rules = mean_brier(candidate), mean_brier(baseline)
    if ours is None or rules is None:
        return False, f"not promoted: no evaluation runs with known labels ({where})"
    if ours >= rules:
        return False, (
            f"not promoted: mean Brier score {ours:.4f} does not beat the rules baseline's "
            f"{rules:.4f} on {where}"
        )
    if worse := label_regressions(candidate, baseline):
        return False, (
            f"not promoted: mean Brier score {ours:.4f} beats the rules baseline's "
            f"{rules:.4f}, but a label with positives is worse than the rules by more than "
            f"{LABEL_MARGIN}: {'; '.join(worse)} on {where}"
        )
    if champion is not None:
        theirs = mean_brier(champion)
        if theirs is not None and ours >= theirs:
            return False, (
                f"not promoted: mean Brier score {ours:.4f} beats the rules baseline's "
                f"{rules:.4f} but not the champion's {theirs:.4f} on {where}"
            )
        return True, (
            f"promoted: mean Brier score {ours:.4f} beats the rules baseline's {rules:.4f} and "
            f"the champion's {_fmt(theirs)}, no label with positives worse than the rules by "
            f"more than {LABEL_MARGIN}, on {where}"
        )
    return True, (
        f"promoted: mean Brier score {ours:.4f} beats the rules baseline's {rules:.4f}, no "
        f"label with positives worse than the rules by more than {LABEL_MARGIN}, on {where} "
        "(no champion before)"
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def reliability_figure(frame: pd.DataFrame, scorers: dict[str, pd.DataFrame], where: str):  # noqa: ANN201 - a matplotlib Figure
    """One reliability diagram per label: observed frequency against predicted probability."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(RISK_LABELS), figsize=(4 * len(RISK_LABELS), 4), sharey=True)
    for ax, label in zip(axes, RISK_LABELS, strict=True):
        known, y = label_rows(frame, label)
        ax.plot([0, 1], [0, 1], linestyle=":", color="grey", label="perfectly calibrated")
        for name, predicted in scorers.items():
            p = predicted.loc[known.index, label].to_numpy()
            if len(y) and 0 < y.sum() < len(y):
                observed, mean_p = calibration_curve(
                    y, p, n_bins=RELIABILITY_BINS, strategy="quantile"
                )
                ax.plot(mean_p, observed, marker="o", label=name)
            elif len(y):
                ax.scatter([p.mean()], [y.mean()], label=f"{name} (one outcome)")
        ax.set_title(f"{LABEL_TEXT[label]}\n({len(y)} runs)", fontsize=9)
        ax.set_xlabel("predicted probability")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("observed frequency")
    axes[-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Reliability on {where}", fontsize=10)
    fig.tight_layout()
    return fig


def side_by_side(
    metrics: dict[str, dict[str, dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Rows label × (Brier, AUC) per scorer, for the note and `--json`."""
    rows = []
    for label in RISK_LABELS:
        row: dict[str, Any] = {"label": label}
        for scorer, per_label in metrics.items():
            m = per_label.get(label, {})
            row["runs"] = m.get("runs", row.get("runs"))
            row[f"{scorer}_brier"] = m.get("brier")
            row[f"{scorer}_auc"] = m.get("roc_auc")
        rows.append(row)
    return rows
