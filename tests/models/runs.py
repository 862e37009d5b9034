"""Per-run frames shaped like gold.run_features, for the models' tests (no Spark needed).

Labels follow the protocol facts the simulator encodes (an entry is unreadable when all Qw
bookies holding it are lost; AutoRecovery cannot repair a ledger that lost Qa bookies; a failed
owner's resent messages are stored twice without deduplication; a killed owner's bundle stays
locked for its 30 s session), with a fraction of labels flipped as noise.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pandas as pd

CONFIGS = ((2, 2, 1), (2, 2, 2), (3, 2, 2), (3, 3, 1), (3, 3, 2))
SCENARIOS = (
    ("none", 0, 0),
    ("kill-bookie", 1, 0),
    ("kill-bookie", 2, 0),
    ("kill-broker", 0, 1),
    ("isolate-broker", 0, 1),
    ("unload", 0, 0),
)


def run_row(
    e: int, qw: int, qa: int, kind: str, lost: int, brokers_down: int, dedup: bool,
    run_id: str, source: str = "simulated", bookies: int = 5,
) -> dict[str, Any]:  # fmt: skip
    return {
        "run_id": run_id, "source": source, "scenario": kind,
        "ensemble_size": e, "write_quorum": qw, "ack_quorum": qa, "bookies": bookies,
        "brokers": 3, "striping": e > qw, "deduplication": dedup, "batching": False,
        "in_flight_max": 100, "partitions": 0, "fault_kind": kind, "fault_bookies": lost,
        "fault_brokers": brokers_down, "bookies_left": bookies - lost,
        "brokers_left": 3 - brokers_down, "data_survived": lost == 0,
        "fault_duration_s": 0.0 if kind == "none" else 30.0,
        "acked_loss": False,
        "unreadable": lost > 0 and lost >= qw,
        "duplicates": kind == "isolate-broker" and not dedup,
        "outage_1s": kind == "kill-broker",
        "autorecovery_impossible": lost > 0 and lost >= qa,
    }  # fmt: skip


def runs(
    seeds: int = 2, noise: float = 0.05, seed: int = 1, source: str = "simulated",
    prefix: str = "sim",
) -> pd.DataFrame:  # fmt: skip
    """Every config × scenario × dedup × seed, labels flipped with probability `noise`."""
    rng = random.Random(seed)
    rows = []
    combos = itertools.product(CONFIGS, SCENARIOS, (False, True), range(seeds))
    for n, ((e, qw, qa), (kind, lost, down), dedup, s) in enumerate(combos):
        row = run_row(e, qw, qa, kind, lost, down, dedup, f"{prefix}-{n}-{s}", source)
        for label in ("unreadable", "duplicates", "outage_1s", "autorecovery_impossible"):
            if rng.random() < noise:
                row[label] = not row[label]
        rows.append(row)
    return pd.DataFrame(rows)
