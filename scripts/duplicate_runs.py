"""Keep `chaos run --json` results of the duplicate runs (issue 27 item 2) in data/real-runs.

    .venv/bin/python scripts/duplicate_runs.py RESULT.json [RESULT.json ...] --release 4.0.7

Each RESULT.json is what `pulsar-audit chaos run ... --json` printed. The run is packed and
listed as `scripts/keyshared_runs.py` does it (the archive of `real_runs.py finish`, the trace
whole, the run's own analyze kept: no second one), with the producer's setup (rate asked and
reached, batching, in-flight limit) and the labels: `expected` (what the configuration
promises: no duplicate with broker deduplication, none promised either way without it; no
acked loss) and `found` (the reader's counts, and the acks the broker answered -1:-1, i.e.
resends it dropped as duplicates).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import keyshared_runs  # noqa: E402
from keyshared_runs import COUNTS, pack_result  # noqa: E402


def _dropped_resends(run_dir: Path) -> int:
    """Acks the broker answered with ledger -1: the resends deduplication dropped."""
    return sum(
        1
        for path in run_dir.glob("*.jsonl")
        for line in path.open()
        if '"event":"ack"' in line and '"ledger_id":-1,' in line
    )


def keep(result_path: Path, release: str, out: Path) -> dict:
    captured, summary, setup, row = pack_result(result_path, release, out)
    run_dir = Path(captured["out"])
    reader = summary["runs"][-1] if summary["runs"] else {}
    dedup = bool(setup.get("deduplication"))
    row.update(
        series="issue-27-item-2",
        seed=None,  # a real run
        rate=setup.get("rate"),
        produce_rate=captured.get("produce_rate"),
        batching=bool(setup.get("batching")),
        in_flight=setup.get("in_flight"),
        chaos=setup.get("chaos"),
        expected={"duplicates": False if dedup else None, "acked_loss": False},
        found={
            **{k: reader.get(k) for k in COUNTS},
            "valid": reader.get("valid"),
            "duplicates": bool(reader.get("duplicated")),
            "acked_loss": bool(reader.get("lost")),
            "dropped_resends": _dropped_resends(run_dir),
        },
    )
    return row


if __name__ == "__main__":
    keyshared_runs.main(keep, __doc__)
