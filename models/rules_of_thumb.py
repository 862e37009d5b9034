"""The rules baseline: the operators' rules of thumb as a scorer with the models' interface.

The rules (from the chaos-test posts):

* Qw ≥ 2 to survive a bookie (Qw > n to survive n): n lost bookies can hold every copy;
* Qa ≥ 2, or AutoRecovery cannot repair a ledger after one bookie is lost;
* at least E bookies available, or new ledgers and cursors cannot be created;
* E > Qw stripes entries over the ensemble, so losing Qw of its bookies leaves some entries
  with no copy.

A rule says yes or no. To be scored on the same footing as a model (Brier score, log loss), each
label's yes and no become the label's observed rates in the training runs where the rule did and
did not fire (Laplace-smoothed); a label no rule speaks to gets its base rate. So the baseline is
as calibrated as the rules allow and no more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from models.frame import LABEL_TEXT, label_rows, typed
from pulsar_audit.schemas import RISK_LABELS


@dataclass(frozen=True)
class Rule:
    name: str
    labels: tuple[str, ...]

    def fires(self, x: pd.DataFrame) -> pd.Series:
        lost = x["fault_bookies"]
        if self.name == "qw_copies":
            return (lost > 0) & (lost >= x["write_quorum"])
        if self.name == "qa_recovery":
            return (lost > 0) & (lost >= x["ack_quorum"])
        if self.name == "e_available":
            return x["bookies_left"] < x["ensemble_size"]
        raise ValueError(f"unknown rule {self.name!r}")

    def words(self, row: pd.Series) -> str:
        e, qw, qa = int(row["ensemble_size"]), int(row["write_quorum"]), int(row["ack_quorum"])
        lost, left = int(row["fault_bookies"]), int(row["bookies_left"])
        bookies = f"{lost} bookie{'s' if lost != 1 else ''}"
        if self.name == "qw_copies":
            stripes = (
                f"; E = {e} > Qw stripes entries, so some entries had all their copies there"
                if e > qw
                else ""
            )
            return (
                f"Qw = {qw}: {bookies} lost can hold every copy of an entry (rule: Qw > n to "
                f"survive n lost bookies){stripes}"
            )
        if self.name == "qa_recovery":
            return (
                f"Qa = {qa}: after {bookies} of this ensemble {'is' if lost == 1 else 'are'} lost "
                "the ledger cannot be closed and re-replicated (rule: Qa ≥ 2, or AutoRecovery "
                "cannot repair a ledger after one bookie is lost)"
            )
        return (
            f"{left} bookies left for E = {e}: new ledgers and cursors cannot be created "
            f"(rule: at least E bookies available)"
        )


RULES = (
    Rule("qw_copies", ("acked_loss", "unreadable")),
    Rule("qa_recovery", ("autorecovery_impossible",)),
    Rule("e_available", ("outage_1s",)),
)


def _rate(y: np.ndarray) -> float:
    return float((y.sum() + 1) / (len(y) + 2))


@dataclass
class RulesBaseline:
    """Rules of thumb with their training hit rates; `fit`, `predict_proba`, `drivers`."""

    name: str = "rules-baseline"
    rates: dict[str, dict[str, float]] = field(default_factory=dict)

    def fit(self, frame: pd.DataFrame) -> RulesBaseline:
        for label in RISK_LABELS:
            known, y = label_rows(frame, label)
            fired = self._fired(typed(known), label).to_numpy()
            self.rates[label] = {
                "fires": _rate(y[fired]),
                "quiet": _rate(y[~fired]),
                "base": _rate(y),
            }
        return self

    def _fired(self, x: pd.DataFrame, label: str) -> pd.Series:
        fired = pd.Series(False, index=x.index)
        for rule in RULES:
            if label in rule.labels:
                fired |= rule.fires(x)
        return fired

    def predict_proba(self, frame: pd.DataFrame) -> pd.DataFrame:
        x = typed(frame)
        out = {}
        for label in RISK_LABELS:
            rates = self.rates[label]
            if not any(label in r.labels for r in RULES):
                out[label] = np.full(len(x), rates["base"])
                continue
            out[label] = np.where(self._fired(x, label), rates["fires"], rates["quiet"])
        return pd.DataFrame(out, index=frame.index)

    def drivers(self, frame: pd.DataFrame, label: str) -> list[list[str]]:
        """Per row: the rules that fire for `label`, in words (none: an empty list)."""
        x = typed(frame)
        fired = {rule.name: rule.fires(x) for rule in RULES if label in rule.labels}
        return [
            [rule.words(x.loc[i]) for rule in RULES if rule.name in fired and fired[rule.name][i]]
            for i in x.index
        ]

    def describe(self) -> str:
        return "; ".join(
            f"{LABEL_TEXT[label]}: {r['fires']:.2f} when a rule fires, {r['quiet']:.2f} otherwise"
            for label, r in self.rates.items()
        )
