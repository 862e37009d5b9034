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

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from keyshared_runs import COUNTS  # noqa: E402
from real_runs import _pack, manifest_row  # noqa: E402

from pulsar_audit.paths import REPO_ROOT  # noqa: E402


def _setup(run_dir: Path) -> dict:
    return next(
        json.loads(line)
        for path in run_dir.glob("*.jsonl")
        for line in path.open()
        if '"event":"config"' in line
    )


def _dropped_resends(run_dir: Path) -> int:
    """Acks the broker answered with ledger -1: the resends deduplication dropped."""
    return sum(
        1
        for path in run_dir.glob("*.jsonl")
        for line in path.open()
        if '"event":"ack"' in line and '"ledger_id":-1,' in line
    )


def keep(result_path: Path, release: str, out: Path) -> dict:
    result = json.loads(result_path.read_text())
    captured = result["capture"]
    run_dir, run_id = Path(captured["out"]), captured["run_id"]
    summary = {
        key: [r for r in result[key] if r["run_id"] == run_id]
        for key in ("runs", "outages", "anomalies")
    }
    _pack(run_dir, summary, out / f"{run_id}.tar.gz", keep=10**9)
    row = manifest_row(run_dir, summary, release)
    setup = _setup(run_dir)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--release", required=True, help="the Pulsar release the runs ran on")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "real-runs")
    args = parser.parse_args()
    manifest = args.out / "manifest.jsonl"
    rows = {}
    for line in manifest.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["run_id"]] = row
    for path in args.results:
        row = keep(path, args.release, args.out)
        rows[row["run_id"]] = row
        print(f"{row['run_id']}: kept ({row['found']['duplicated']} duplicated)")  # noqa: T201
    manifest.write_text("".join(json.dumps(r, default=str) + "\n" for _, r in sorted(rows.items())))
    print(f"manifest has {len(rows)} runs")  # noqa: T201


if __name__ == "__main__":
    main()
