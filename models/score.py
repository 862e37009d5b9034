"""`risk score` and `risk what-if`: the champion scores E/Qw/Qa settings under faults.

`risk score` takes the settings a cluster really has: each namespace's persistence policy
(`/admin/policies/<tenant>/<namespace>` in the newest ZooKeeper capture of each ensemble) and
the bookies and brokers registered there. `risk what-if` takes one setting from the command
line. Both build the raw features a run would have had, score every label, and say in words
what drives each score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import Window as W
from pyspark.sql import functions as F

from models.frame import LABEL_TEXT, RAW_FEATURES
from pulsar_audit.errors import UsageError
from pulsar_audit.schemas import RISK_LABELS

DEFAULT_FAULTS = ("none", "kill-bookies:1", "kill-bookies:2", "kill-broker", "isolate-broker")
POLICY_PATH = r"^/admin/policies/([^/]+/[^/]+)$"
BOOKIE_PATH = r"^/ledgers/available/([^/]+)$"
BROKER_PATH = r"^/loadbalance/brokers/([^/]+)$"
POLICY, DEFAULT_POLICY = "namespace policy", "broker default (assumed {})"
BASELINE_NAME = "rules-baseline"
_FAULT = re.compile(
    r"^(none|kill-bookies?|kill-broker|isolate-broker|isolate-bookie|unload|transfer)(?::(\d+))?$"
)


@dataclass(frozen=True)
class Fault:
    """A fault to score under: its kind as run_features names it, and the bookies it takes."""

    spec: str
    kind: str
    bookies: int = 0
    brokers: int = 0

    def words(self) -> str:
        n = self.bookies
        return {
            "none": "no fault",
            "kill-bookie": f"{n} bookie{'s' if n != 1 else ''} of the ensemble lost",
            "kill-broker": "the topic's broker killed",
            "isolate-broker": "the topic's broker cut off from ZooKeeper",
            "isolate-bookie": "a bookie cut off from ZooKeeper",
            "unload": "an unload of the bundle",
            "transfer": "a transfer of the bundle",
        }[self.kind]


def parse_fault(text: str) -> Fault:
    """'kill-bookies:2' → Fault('kill-bookies:2', 'kill-bookie', bookies=2)."""
    match = _FAULT.match(text.strip())
    if not match:
        raise UsageError(
            f"unknown fault {text!r}; expected none, kill-bookies:N, kill-bookie, kill-broker, "
            "isolate-broker, isolate-bookie, unload or transfer"
        )
    name, count = match.group(1), match.group(2)
    if name in ("kill-bookie", "kill-bookies"):
        return Fault(text.strip(), "kill-bookie", bookies=int(count or 1))
    if count:
        raise UsageError(f"fault {name} takes no ':N' (only kill-bookies:N does)")
    return Fault(name, name, brokers=1 if name in ("kill-broker", "isolate-broker") else 0)


def parse_config(text: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"(\d+)-(\d+)-(\d+)", text.strip())
    if not match:
        raise UsageError(f"--config must be E-Qw-Qa, e.g. 3-2-1; got {text!r}")
    e, qw, qa = (int(g) for g in match.groups())
    if not e >= qw >= qa >= 1:
        raise UsageError(f"--config {text}: expected E >= Qw >= Qa >= 1")
    return e, qw, qa


# ----------------------------------------------------------------------------- ZooKeeper


def newest_capture_state(zk_changes: DataFrame) -> DataFrame:
    """Each znode as the newest capture of its ensemble last saw it (deleted ones dropped)."""
    newest = zk_changes.groupBy("zookeeper").agg(F.max_by("capture_id", "ts").alias("capture_id"))
    last = W.partitionBy("zookeeper", "path").orderBy(F.desc("ts"), F.desc("line_number"))
    return (
        zk_changes.join(newest, ["zookeeper", "capture_id"], how="inner")
        .withColumn("rank", F.row_number().over(last.rowsBetween(W.unboundedPreceding, 0)))
        .filter((F.col("rank") == 1) & (F.col("op") != "delete"))
        .drop("rank")
    )


def cluster_settings(zk_changes: DataFrame) -> DataFrame:
    """Per (ZooKeeper ensemble, namespace): E/Qw/Qa of its policy, deduplication, and the
    bookies and brokers registered in that ensemble. Few rows: one per namespace."""
    state = newest_capture_state(zk_changes)
    path, decoded = F.col("path"), F.col("decoded")
    persistence = {
        "ensemble_size": "$.persistence.bookkeeperEnsemble",
        "write_quorum": "$.persistence.bookkeeperWriteQuorum",
        "ack_quorum": "$.persistence.bookkeeperAckQuorum",
    }
    namespaces = state.filter(path.rlike(POLICY_PATH)).select(
        F.col("zookeeper").alias("cluster"),
        F.regexp_extract(path, POLICY_PATH, 1).alias("namespace"),
        *[F.get_json_object(decoded, p).cast("int").alias(n) for n, p in persistence.items()],
        F.coalesce(
            F.get_json_object(decoded, "$.deduplicationEnabled").cast("boolean"), F.lit(False)
        ).alias("deduplication"),
    )
    is_bookie = path.rlike(BOOKIE_PATH) & (F.regexp_extract(path, BOOKIE_PATH, 1) != "readonly")
    members = state.groupBy(F.col("zookeeper").alias("cluster")).agg(
        F.sum(is_bookie.cast("int")).alias("bookies"),
        F.sum(path.rlike(BROKER_PATH).cast("int")).alias("brokers"),
    )
    return namespaces.join(members, ["cluster"], how="left")


# ----------------------------------------------------------------------------- features


def feature_rows(
    settings: pd.DataFrame, faults: list[Fault], defaults: dict[str, Any]
) -> pd.DataFrame:
    """One row of raw features per (setting, fault); faults that cannot hit the ensemble (more
    bookies lost than E) are left out."""
    rows = []
    for _, s in settings.iterrows():
        e, qw, qa = int(s["ensemble_size"]), int(s["write_quorum"]), int(s["ack_quorum"])
        bookies = int(s["bookies"])
        brokers = int(s["brokers"]) if pd.notna(s.get("brokers")) and s["brokers"] else None
        brokers = brokers or int(defaults.get("brokers", 3))
        for fault in faults:
            if fault.bookies > e:
                continue
            duration = defaults.get("fault_duration_s", {}).get(fault.kind, 0.0)
            rows.append(
                {
                    **{k: s[k] for k in settings.columns if k not in RAW_FEATURES},
                    "fault": fault.spec,
                    "fault_words": fault.words(),
                    "ensemble_size": e,
                    "write_quorum": qw,
                    "ack_quorum": qa,
                    "bookies": bookies,
                    "brokers": brokers,
                    "striping": e > qw,
                    "deduplication": bool(s.get("deduplication", False)),
                    "batching": False,
                    "in_flight_max": int(defaults.get("in_flight_max", 1000)),
                    "partitions": 0,
                    "fault_kind": fault.kind,
                    "fault_bookies": fault.bookies,
                    "fault_brokers": fault.brokers,
                    "bookies_left": bookies - fault.bookies,
                    "brokers_left": brokers - fault.brokers,
                    "data_survived": fault.bookies == 0,
                    "fault_duration_s": 0.0 if fault.kind == "none" else float(duration),
                }
            )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- scoring


def score_rows(
    rows: pd.DataFrame, model: Any, baseline: Any, support: pd.DataFrame | None
) -> list[dict[str, Any]]:
    """Per row and label: probability, the baseline's, drivers and an explanation in words.

    model: the champion's ConfigRiskModel, or None to score with the rules baseline alone.
    """
    if rows.empty:
        return []
    rows = rows.reset_index(drop=True)
    scorer = model if model is not None else baseline
    probabilities = scorer.predict_proba(rows)
    rules = baseline.predict_proba(rows)
    out = []
    for label in RISK_LABELS:
        fired = baseline.drivers(rows, label)
        learned = model.drivers(rows, label) if model is not None else [[] for _ in rows.index]
        for i, row in rows.iterrows():
            drivers = _first_two([*fired[i][:1], *learned[i], *fired[i][1:]])
            runs, failed = _support(support, row, label)
            p = float(probabilities.loc[i, label])
            out.append(
                {
                    **row.to_dict(),
                    "label": label,
                    "risk": p,
                    "baseline_risk": float(rules.loc[i, label]),
                    "drivers": drivers,
                    "explanation": explain(drivers, label, p, row["fault_words"], runs),
                    "runs": runs,
                    "failed_runs": failed,
                }
            )
    return out


def _first_two(words: list[str]) -> list[str]:
    seen: list[str] = []
    for w in words:
        if w and w not in seen:
            seen.append(w)
    return seen[:2]


def _support(support: pd.DataFrame | None, row: pd.Series, label: str) -> tuple[int, int]:
    """Training runs with this row's E/Qw/Qa, fault kind and bookies lost, and how many had
    the label."""
    if support is None or support.empty:
        return 0, 0
    keys = ["ensemble_size", "write_quorum", "ack_quorum", "fault_kind", "fault_bookies"]
    match = support
    for key in keys:
        match = match[match[key] == row[key]]
    return int(match["runs"].sum()), int(match[label].sum())


def explain(drivers: list[str], label: str, p: float, fault: str, runs: int) -> str:
    """'Qa = 1: … (probability of an unrecoverable ledger 0.83 given 1 bookie … lost)'."""
    what = f"probability of {LABEL_TEXT[label]} {p:.2f} given {fault}"
    lead = "; ".join(drivers) if drivers else "nothing in this setting raises it"
    text = f"{lead} ({what})"
    if runs == 0:
        text += "; no training run had this setting and fault, so the score extrapolates"
    return text
