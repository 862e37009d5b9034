"""The config-risk model: per label, a calibrated logistic regression on the per-run frame.

Why scikit-learn and not Spark MLlib: the training frame is one row per run (hundreds to a few
thousand rows), and what matters is calibration — scikit-learn's `CalibratedClassifierCV`
(isotonic or Platt calibration fitted on held-out folds), `brier_score_loss`, `log_loss` and
`calibration_curve` have no MLlib equivalent. Why logistic regression: its log-odds add up per
feature, so every score comes with the one or two features that drive it, in words.

A label too rare to calibrate (fewer than two runs of either class) is predicted by its
smoothed base rate, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from models.frame import label_rows, mechanisms
from pulsar_audit.schemas import RISK_LABELS

MAX_FOLDS = 3
# Chosen on per-run frames shaped like the simulator's (tests/models/runs.py, 40–130 runs, 5–10 %
# label noise): isotonic calibration over 3 folds of an L2 logistic regression (C = 0.3) had the
# lowest hold-out Brier score; Platt scaling on folds this small pulled every score toward 0.5.
CALIBRATION = "isotonic"
REGULARIZATION = 0.3
# Words for a feature that pushes a score up: (when it is 1 or numeric, when it is 0; None:
# say nothing). Format fields: the row's raw features.
FEATURE_WORDS: dict[str, tuple[str | None, str | None]] = {
    "lost_all_copies": (
        "{fault_bookies} bookie(s) lost with Qw = {write_quorum}: every copy of some entries "
        "was on them",
        "Qw = {write_quorum} keeps a copy of every entry out of reach of the fault",
    ),
    "lost_ack_quorum": (
        "{fault_bookies} bookie(s) lost with Qa = {ack_quorum}: the ledger cannot be closed "
        "and re-replicated",
        None,
    ),
    "fewer_bookies_than_e": (
        "{bookies_left} bookies left for E = {ensemble_size}: no new ensemble can be formed",
        None,
    ),
    "owner_change_no_dedup": (
        "the topic changes owner ({fault_kind}) with deduplication off: resent messages are "
        "stored twice",
        None,
    ),
    "owner_change": ("the topic changes owner ({fault_kind}): producers wait for it", None),
    "fault=kill-broker": (
        "the owner is killed: its bundle stays locked until its metadata session expires",
        None,
    ),
    "fault=isolate-broker": ("the owner is cut off from ZooKeeper", None),
    "fault=kill-bookie": ("bookies of the ensemble are killed", None),
    "fault=isolate-bookie": ("a bookie is cut off from ZooKeeper", None),
    "fault=unload": ("the bundle is unloaded", None),
    "fault=transfer": ("the bundle is transferred", None),
    "ack_quorum": ("Qa = {ack_quorum}", "Qa = {ack_quorum}"),
    "write_quorum": ("Qw = {write_quorum}", "Qw = {write_quorum}"),
    "ensemble_size": ("E = {ensemble_size}", "E = {ensemble_size}"),
    "striping": ("E = {ensemble_size} > Qw = {write_quorum} stripes entries", None),
    "deduplication": ("deduplication on", "deduplication off"),
    "fault_bookies": ("{fault_bookies} bookie(s) lost", "{fault_bookies} bookie(s) lost"),
    "bookies_left": ("{bookies_left} bookies left", "{bookies_left} bookies left"),
    "log_fault_duration": ("the fault lasts {fault_duration_s:.0f} s", None),
    "log_in_flight": ("{in_flight_max} messages in flight", None),
    "data_survived": (
        "the lost bookies come back with their data",
        "the lost bookies do not come back",
    ),
}
BOOLEAN_FEATURES = {
    "lost_all_copies",
    "lost_ack_quorum",
    "fewer_bookies_than_e",
    "owner_change_no_dedup",
    "owner_change",
    "striping",
    "deduplication",
    "data_survived",
}


@dataclass
class LabelModel:
    """One label's fitted classifier, or its smoothed base rate when too rare to fit."""

    label: str
    classifier: Any = None
    base_rate: float = 0.5
    runs: int = 0
    positives: int = 0

    @property
    def kind(self) -> str:
        return "calibrated logistic regression" if self.classifier is not None else "base rate"

    def predict(self, design: pd.DataFrame) -> np.ndarray:
        if self.classifier is None:
            return np.full(len(design), self.base_rate)
        return self.classifier.predict_proba(design)[:, 1]

    def contributions(self, design: pd.DataFrame) -> pd.DataFrame:
        """Per row and feature: its share of the log-odds, averaged over the calibration folds."""
        if self.classifier is None:
            return pd.DataFrame(0.0, index=design.index, columns=design.columns)
        parts = []
        for fold in self.classifier.calibrated_classifiers_:
            scaler, regression = fold.estimator[0], fold.estimator[-1]
            scaled = scaler.transform(design)
            parts.append(scaled * regression.coef_[0])
        return pd.DataFrame(np.mean(parts, axis=0), index=design.index, columns=design.columns)


@dataclass
class ConfigRiskModel:
    """Per label a calibrated classifier; `fit`, `predict_proba`, `drivers` like the rules."""

    name: str = "calibrated-logistic-regression"
    seed: int = 7
    labels: dict[str, LabelModel] = field(default_factory=dict)
    features: list[str] = field(default_factory=list)

    def fit(self, frame: pd.DataFrame) -> ConfigRiskModel:
        for label in RISK_LABELS:
            known, y = label_rows(frame, label)
            self.labels[label] = self._fit_label(label, mechanisms(known), y)
        self.features = list(mechanisms(frame.head(1)).columns)
        return self

    def _fit_label(self, label: str, design: pd.DataFrame, y: np.ndarray) -> LabelModel:
        positives = int(y.sum())
        minority = min(positives, len(y) - positives)
        fitted = LabelModel(label, None, (positives + 1) / (len(y) + 2), len(y), positives)
        if minority < 2:
            return fitted
        base = make_pipeline(StandardScaler(), LogisticRegression(C=REGULARIZATION, max_iter=5000))
        folds = StratifiedKFold(min(MAX_FOLDS, minority), shuffle=True, random_state=self.seed)
        calibrated = CalibratedClassifierCV(base, method=CALIBRATION, cv=folds)
        fitted.classifier = calibrated.fit(design, y)
        return fitted

    def predict_proba(self, frame: pd.DataFrame) -> pd.DataFrame:
        design = mechanisms(frame)
        return pd.DataFrame(
            {label: self.labels[label].predict(design) for label in RISK_LABELS},
            index=frame.index,
        )

    def drivers(self, frame: pd.DataFrame, label: str, top: int = 2) -> list[list[str]]:
        """Per row: the one or two features that push `label`'s score up most, in words."""
        design = mechanisms(frame)
        pushed = self.labels[label].contributions(design)
        rows = []
        for i in frame.index:
            ranked = pushed.loc[i].sort_values(ascending=False)
            words = [
                describe_feature(name, design.loc[i, name], frame.loc[i])
                for name, value in ranked.items()
                if value > 0.05
            ]
            rows.append([w for w in words if w][:top])
        return rows

    def describe(self) -> str:
        return "; ".join(
            f"{label}: {m.kind} ({m.positives}/{m.runs} runs)" for label, m in self.labels.items()
        )


def describe_feature(name: str, value: float, row: pd.Series) -> str | None:
    """A design feature's words for this row, or None when it has none worth saying."""
    if name.startswith("fault=") and value == 0:
        return None
    when_on, when_off = FEATURE_WORDS.get(name, (None, None))
    text = (
        when_off
        if (name in BOOLEAN_FEATURES or name.startswith("fault=")) and not value
        else when_on
    )
    if text is None:
        return None
    try:
        return text.format(**{k: row[k] for k in row.index})
    except (KeyError, ValueError):
        return None
