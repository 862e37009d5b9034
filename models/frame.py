"""The per-run frame the models learn from: gold.run_features as pandas (one row per run), the
raw features a scorer takes, and the mechanisms derived from them.

One row per run is small by construction (a sweep of thousands of runs is still kilobytes),
so it is the one place where the project works in pandas.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from pulsar_audit.schemas import RISK_LABELS

# What a scorer takes: the settings and the fault (the columns of gold.run_features before
# the labels). `risk score` and `risk what-if` build the same columns.
RAW_FEATURES = (
    "ensemble_size",
    "write_quorum",
    "ack_quorum",
    "bookies",
    "brokers",
    "striping",
    "deduplication",
    "batching",
    "in_flight_max",
    "partitions",
    "fault_kind",
    "fault_bookies",
    "fault_brokers",
    "bookies_left",
    "brokers_left",
    "data_survived",
    "fault_duration_s",
)
FAULT_KINDS = (
    "none",
    "unload",
    "transfer",
    "kill-broker",
    "isolate-broker",
    "kill-bookie",
    "isolate-bookie",
    "partition-broker-from-bookies",
    "lossy-broker-bookies",
    "other",
)
OWNER_CHANGES = ("unload", "transfer", "kill-broker", "isolate-broker")
_INTS = (
    "ensemble_size",
    "write_quorum",
    "ack_quorum",
    "bookies",
    "brokers",
    "in_flight_max",
    "partitions",
    "fault_bookies",
    "fault_brokers",
    "bookies_left",
    "brokers_left",
)
_BOOLS = ("striping", "deduplication", "batching", "data_survived")
HOLD_OUT_PERCENT = 30
LABEL_TEXT = {
    "acked_loss": "acknowledged messages lost",
    "unreadable": "acknowledged messages unreadable",
    "duplicates": "duplicates",
    "outage_1s": "a produce outage of 1 s or more",
    "autorecovery_impossible": "an unrecoverable ledger",
}


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The raw features with fixed dtypes (what the MLflow signature records)."""
    out = pd.DataFrame(index=frame.index)
    for name in RAW_FEATURES:
        if name in _INTS:
            out[name] = frame[name].fillna(0).astype("int64")
        elif name in _BOOLS:
            out[name] = frame[name].fillna(False).astype(bool)
        elif name == "fault_kind":
            out[name] = frame[name].fillna("none").astype(str)
        else:
            out[name] = frame[name].fillna(0.0).astype("float64")
    return out


def mechanisms(frame: pd.DataFrame) -> pd.DataFrame:
    """Numeric design matrix: the settings, the fault kind one-hot, and the protocol mechanisms
    the rules of thumb name (copies within reach, quorum for recovery, bookies for a new
    ensemble, an owner change without deduplication)."""
    x = typed(frame)
    lost = x["fault_bookies"]
    kind = x["fault_kind"].where(x["fault_kind"].isin(FAULT_KINDS), "other")
    owner_change = kind.isin(OWNER_CHANGES)
    design = {
        "ensemble_size": x["ensemble_size"],
        "write_quorum": x["write_quorum"],
        "ack_quorum": x["ack_quorum"],
        "bookies": x["bookies"],
        "brokers": x["brokers"],
        "striping": x["striping"],
        "deduplication": x["deduplication"],
        "batching": x["batching"],
        "log_in_flight": np.log1p(x["in_flight_max"].clip(lower=0)),
        "partitions": x["partitions"],
        "fault_bookies": lost,
        "fault_brokers": x["fault_brokers"],
        "bookies_left": x["bookies_left"],
        "data_survived": x["data_survived"],
        "log_fault_duration": np.log1p(x["fault_duration_s"].clip(lower=0)),
        "lost_all_copies": (lost > 0) & (lost >= x["write_quorum"]),
        "lost_ack_quorum": (lost > 0) & (lost >= x["ack_quorum"]),
        "fewer_bookies_than_e": x["bookies_left"] < x["ensemble_size"],
        "owner_change": owner_change,
        "owner_change_no_dedup": owner_change & ~x["deduplication"],
        **{f"fault={k}": kind == k for k in FAULT_KINDS},
    }
    return pd.DataFrame(design, index=frame.index).astype("float64")


def complete(frame: pd.DataFrame) -> pd.DataFrame:
    """Runs a model can learn from: their E/Qw/Qa and cluster size are known."""
    needed = ["ensemble_size", "write_quorum", "ack_quorum", "bookies", "brokers"]
    return frame.dropna(subset=needed).reset_index(drop=True)


def held_out(run_id: str) -> bool:
    """Whether a simulated run is in the hold-out split (stable: by a hash of its id)."""
    return zlib.crc32(run_id.encode()) % 100 < HOLD_OUT_PERCENT


def label_rows(frame: pd.DataFrame, label: str) -> tuple[pd.DataFrame, np.ndarray]:
    """The runs whose `label` is known, and the label as 0/1."""
    known = frame[frame[label].notna()]
    return known, known[label].astype(bool).astype(int).to_numpy()


__all__ = ["RAW_FEATURES", "RISK_LABELS", "LABEL_TEXT", "mechanisms", "typed", "complete"]
