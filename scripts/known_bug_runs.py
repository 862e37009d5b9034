"""Keep `chaos run --json` results of the known-bug runs (issue 27 item 3) in data/real-runs.

    .venv/bin/python scripts/known_bug_runs.py RESULT.json [...] --bug apache/pulsar#18236 \\
        --release 2.10.2

or, for runs captured by `capture run` and analyzed together afterwards (one `analyze` over
several runs: one Spark session instead of one per run),

    .venv/bin/python scripts/known_bug_runs.py RUN_DIR [...] --analyzed ANALYZE.json --bug ...

(`--autorecovery`, `--skip-lost-data`: the cluster was started so, which the trace does not say.)

Each run is packed as `scripts/keyshared_runs.py` packs one (the archive of `real_runs.py
finish`, the trace whole, the run's own analyze kept: no second one) and its manifest row is
appended (manifest.jsonl merges as a union of lines) with `series: "issue-27-item-3"`, the
bug, whether its thread names the release as affected, and the labels: `expected` (what the
thread says that release does in this scenario) and `found` (what analyze reported).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from keyshared_runs import COUNTS, KEY_KINDS, found_labels, pack_result  # noqa: E402

from pulsar_audit.paths import REPO_ROOT  # noqa: E402

SETUP = ("consumer", "subscription_type", "consumers", "keys", "consumer_churn", "rate", "chaos")
# bug → (releases its thread names as affected, as fixed; what the affected ones do here)
BUGS = {
    # A subscription created at the latest position by the admin API persisted its read
    # position, one entry on, in its cursor ledger; a broker killed before the mark-delete
    # reached ZooKeeper recovered the cursor from that ledger: the first entry is skipped.
    # Reported on 2.9.3 and 2.10.2, fixed by apache/pulsar#18237 in 2.10.3 and 2.11.1.
    "apache/pulsar#18236": {
        "affected": ("2.9.3", "2.10.2"),
        "fixed": ("2.10.3", "2.11.1"),
        "when_affected": {"acked_loss": True},
    },
    # Key_Shared (AUTO_SPLIT) lost a key's order when consumers restarted in turn; fixed by
    # PIP-379 (apache/pulsar#23352) in 4.0.0; 3.x keeps the old dispatcher.
    "apache/pulsar#23307": {
        "affected": ("3.0.7", "3.3.6"),
        "fixed": ("4.0.0", "4.0.7"),
        "when_affected": {"key_violations": None},  # possible, not promised: a race
    },
    # AutoRecovery's replication worker stopped re-replicating after its first ledger (the
    # auditor's under-replication callback, removed by apache/bookkeeper#4058 in BookKeeper
    # 4.16.3); reported on 3.0.0, fixed in 3.0.2 (its BookKeeper 4.16.3). With the write
    # quorum's second disk lost later, what only the first held is gone.
    "apache/pulsar#21987": {
        "affected": ("3.0.0",),
        "fixed": ("3.0.2",),
        "when_affected": {"acked_loss": True},
    },
}


def expected(bug: str, release: str) -> dict:
    """The labels a run of `bug`'s scenario should get on `release`, by the bug's thread."""
    known = BUGS[bug]
    if release in known["affected"]:
        return {"release_affected": True, **known["when_affected"]}
    if release in known["fixed"]:
        return {"release_affected": False, **{k: False if k == "acked_loss" else 0
                                              for k in known["when_affected"]}}  # fmt: skip
    raise SystemExit(f"{bug}: release {release} is neither affected nor fixed in its thread")


def keep(result_path: Path, bug: str, release: str, out: Path, cluster: dict | None = None) -> dict:
    """Pack one run and its manifest row; cluster: how the cluster was started (`cluster up`
    options the trace does not record), kept in the row as given."""
    captured, summary, setup, row = pack_result(result_path, release, out)
    reader = summary["runs"][-1] if summary["runs"] else {}
    row.update(
        series="issue-27-item-3",
        bug=bug,
        seed=None,  # a real run
        **{key: setup.get(key) for key in SETUP},
        **(cluster or {}),
        expected=expected(bug, release),
        found={
            **{k: reader.get(k) for k in COUNTS},
            "valid": reader.get("valid"),
            **found_labels(reader),
            "key_violations": sum(reader.get(k) or 0 for k in KEY_KINDS),
            "reached_end": captured["consume"].get("reached_end"),
        },
    )
    return row


def _as_chaos_result(run_dir: Path, analyzed: Path) -> Path:
    """What `chaos run --json` prints for `run_dir`: its capture and the analyze of it."""
    captured = json.loads((run_dir / "capture.json").read_text())
    captured["out"] = str(run_dir)  # where the run is now (it may have moved since)
    result = {**json.loads(analyzed.read_text()), "capture": captured}
    path = Path(tempfile.mkdtemp()) / f"{run_dir.name}.json"
    path.write_text(json.dumps(result))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--bug", required=True, choices=sorted(BUGS))
    parser.add_argument("--release", required=True, help="the Pulsar release the runs ran on")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "real-runs")
    parser.add_argument("--analyzed", type=Path, help="`analyze --json` of the RUN_DIRs given")
    parser.add_argument("--autorecovery", action="store_true", help="the cluster ran it")
    parser.add_argument("--skip-lost-data", action="store_true", help="the brokers skipped")
    args = parser.parse_args()
    cluster = None
    if args.autorecovery or args.skip_lost_data:
        cluster = {"autorecovery": args.autorecovery, "skip_lost_data": args.skip_lost_data}
    if args.analyzed:
        args.results = [_as_chaos_result(run, args.analyzed) for run in args.results]
    manifest = args.out / "manifest.jsonl"
    kept = {json.loads(line)["run_id"] for line in manifest.read_text().splitlines() if line}
    with manifest.open("a") as rows:
        for path in args.results:
            row = keep(path, args.bug, args.release, args.out, cluster)
            if row["run_id"] not in kept:
                rows.write(json.dumps(row, default=str) + "\n")
            found = row["found"]
            print(f"{row['run_id']}: kept ({found['received']} received, {found['lost']} lost, "  # noqa: T201
                  f"{found['key_violations']} key violations)")  # fmt: skip


if __name__ == "__main__":
    main()
