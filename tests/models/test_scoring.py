"""The rules baseline, the model's drivers and the scores' words (pandas only, no Spark)."""

from __future__ import annotations

import pandas as pd
import pytest
from runs import run_row, runs

from models.model import ConfigRiskModel
from models.rules_of_thumb import RulesBaseline
from models.score import explain, feature_rows, parse_fault, score_rows
from models.train import defaults, support
from pulsar_audit.errors import UsageError


@pytest.fixture(scope="module")
def fitted():
    frame = runs(seeds=2, noise=0.05)
    return ConfigRiskModel().fit(frame), RulesBaseline().fit(frame), support(frame), frame


def _setting(config: str, bookies: int = 5) -> pd.DataFrame:
    e, qw, qa = (int(v) for v in config.split("-"))
    return pd.DataFrame(
        [
            {
                "ensemble_size": e,
                "write_quorum": qw,
                "ack_quorum": qa,
                "bookies": bookies,
                "brokers": 3,
                "deduplication": False,
            }
        ]  # fmt: skip
    )


def test_faults_parse_and_refuse() -> None:
    assert parse_fault("kill-bookies:2").bookies == 2
    assert parse_fault("kill-bookie").kind == "kill-bookie"
    assert parse_fault("kill-broker").brokers == 1
    with pytest.raises(UsageError, match="unknown fault 'kill-zk'"):
        parse_fault("kill-zk")
    with pytest.raises(UsageError, match="takes no ':N'"):
        parse_fault("unload:2")


def test_the_rules_fire_on_their_mechanisms() -> None:
    rows = pd.DataFrame(
        [
            run_row(2, 2, 1, "kill-bookie", 1, 0, False, "a"),  # Qa = 1, one bookie lost
            run_row(3, 2, 2, "kill-bookie", 2, 0, False, "b"),  # Qw = 2 bookies lost
            run_row(3, 3, 2, "none", 0, 0, False, "c", bookies=2),  # 2 bookies for E = 3
            run_row(3, 3, 2, "none", 0, 0, False, "d"),
        ]
    )
    baseline = RulesBaseline().fit(runs(seeds=1, noise=0.0))
    assert baseline.drivers(rows, "autorecovery_impossible")[0] == [
        "Qa = 1: after 1 bookie of this ensemble is lost the ledger cannot be closed and "
        "re-replicated (rule: Qa ≥ 2, or AutoRecovery cannot repair a ledger after one bookie "
        "is lost)"
    ]
    [[copies]] = [baseline.drivers(rows, "unreadable")[1]]
    assert copies.startswith("Qw = 2: 2 bookies lost can hold every copy of an entry")
    assert "E = 3 > Qw stripes entries" in copies
    assert baseline.drivers(rows, "outage_1s")[2] == [
        "2 bookies left for E = 3: new ledgers and cursors cannot be created (rule: at least E "
        "bookies available)"
    ]
    assert [baseline.drivers(rows, label)[3] for label in ("unreadable", "outage_1s")] == [[], []]
    p = baseline.predict_proba(rows)
    # noise-free training runs: Laplace-smoothed rates, high where the rule fires
    assert p.loc[0, "autorecovery_impossible"] > 0.9 > 0.1 > p.loc[3, "autorecovery_impossible"]


def test_a_score_says_what_drives_it(fitted) -> None:
    model, baseline, counted, frame = fitted
    rows = feature_rows(_setting("2-2-1"), [parse_fault("kill-bookies:1")], defaults(frame))
    scored = {r["label"]: r for r in score_rows(rows, model, baseline, counted)}
    recovery = scored["autorecovery_impossible"]
    safer = feature_rows(_setting("2-2-2"), [parse_fault("kill-bookies:1")], defaults(frame))
    [qa2] = [r for r in score_rows(safer, model, baseline, counted)
             if r["label"] == "autorecovery_impossible"]  # fmt: skip
    assert recovery["risk"] > 0.5 > 2 * qa2["risk"]  # Qa = 1 is what makes it risky
    assert recovery["explanation"].startswith("Qa = 1: after 1 bookie of this ensemble is lost")
    assert recovery["explanation"].endswith(
        f"(probability of an unrecoverable ledger {recovery['risk']:.2f} given 1 bookie of the "
        "ensemble lost)"
    )
    assert len(recovery["drivers"]) == 2
    same = frame[(frame["ack_quorum"] == 1) & (frame["ensemble_size"] == 2)]
    same = same[same["fault_bookies"] == 1]
    assert recovery["runs"] == len(same) == 4  # 2 seeds × deduplication off and on
    assert recovery["failed_runs"] == same["autorecovery_impossible"].sum()
    assert scored["unreadable"]["risk"] < 0.3  # Qw = 2 keeps a copy of every entry


def test_an_owner_change_without_deduplication_drives_duplicates(fitted) -> None:
    model, baseline, counted, frame = fitted
    rows = feature_rows(_setting("2-2-2"), [parse_fault("isolate-broker")], defaults(frame))
    [dup] = [r for r in score_rows(rows, model, baseline, counted) if r["label"] == "duplicates"]
    assert dup["risk"] > 0.6 > dup["baseline_risk"]  # no rule of thumb speaks to duplicates
    assert any("deduplication off" in d for d in dup["drivers"])


def test_faults_beyond_the_ensemble_are_left_out_and_extrapolation_is_said() -> None:
    rows = feature_rows(_setting("1-1-1", bookies=1), [parse_fault("kill-bookies:2")], {})
    assert rows.empty
    text = explain([], "outage_1s", 0.25, "no fault", runs=0)
    assert text == (
        "nothing in this setting raises it (probability of a produce outage of 1 s or more 0.25 "
        "given no fault); no training run had this setting and fault, so the score extrapolates"
    )
