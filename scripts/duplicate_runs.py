"""Keep real runs of issue 27 (duplicates, item 2; disk loss and more, item 4) in data/real-runs.

    .venv/bin/python scripts/duplicate_runs.py RESULT.json [RESULT.json ...] --release 4.0.7

Each RESULT.json is what `pulsar-audit chaos run ... --json` printed. With `--analyze`, each is
what `pulsar-audit capture run ... --json` printed instead, and the runs' analyze is the one
`pulsar-audit analyze STAGE --json` over the folder holding them all (one analyze for several
runs); `--session-expired`, `--autorecovery` and `--skip-lost-data` say how the cluster was
started (`cluster up`), which the trace does not record. The run is packed and listed as
`scripts/keyshared_runs.py` does it (the archive of `real_runs.py finish`, the trace whole),
with the producer's setup (rate asked and reached, batching, in-flight limit) and the labels:
`expected`, derived from the configuration and the fault alone (see `expected`), and `found`
(the reader's counts, whether it reached the end, and the acks the broker answered -1:-1,
i.e. resends it dropped as duplicates).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from keyshared_runs import COUNTS, found_labels, keep_all, pack_result  # noqa: E402

from pulsar_audit.paths import REPO_ROOT  # noqa: E402

LOSES_THE_WRITE_QUORUM = "wipe-qw-bookies-disk"
LOSES_ONE_DISK = "wipe-bookie-disk"


def expected(setup: dict, skip_lost_data: bool) -> dict:
    """What the configuration and the fault promise, before the run.

    acked_loss: every copy of some acknowledged entries is gone — the disks of the current
    ledger's write quorum wiped (the entries written to exactly those bookies), or one disk
    wiped when Qw = 1; any other fault here (one disk at Qw >= 2, a broker killed or cut off)
    leaves a copy. duplicates: False with broker deduplication; None without (possible, not
    promised). reader_reaches_end: False when acked data is lost and the brokers do not skip
    lost ledgers (every read of the lost ledger fails), else True. A run of several actions
    promises what the worst of them does.
    """
    # every action of the run (`capture run --chaos` repeated: "unload@500,wipe-…@1000")
    actions = {part.split("@")[0] for part in (setup.get("chaos") or "").split(",")}
    loss = LOSES_THE_WRITE_QUORUM in actions or (
        LOSES_ONE_DISK in actions and setup["write_quorum"] == 1
    )
    return {
        "acked_loss": loss,
        "duplicates": False if setup["deduplication"] else None,
        "reader_reaches_end": skip_lost_data or not loss,
    }


def _dropped_resends(run_dir: Path) -> int:
    """Acks the broker answered with ledger -1: the resends deduplication dropped."""
    return sum(
        1
        for path in run_dir.glob("*.jsonl")
        for line in path.open()
        if '"event":"ack"' in line and '"ledger_id":-1,' in line
    )


def cluster_settings(args: argparse.Namespace) -> dict:
    """How the cluster was started (`cluster up` options), which the trace does not record;
    nothing when none is given (the item-2 rows)."""
    if args.session_expired is None:
        return {}
    return {
        "autorecovery": args.autorecovery,
        "skip_lost_data": args.skip_lost_data,
        "session_expired": args.session_expired,
    }


def keep(
    result: Path | dict,
    release: str,
    out: Path,
    series: str = "issue-27-item-2",
    cluster: dict | None = None,
) -> dict:
    """Pack one run and give its manifest row, labelled for `series`."""
    captured, summary, setup, row = pack_result(result, release, out)
    run_dir = Path(captured["out"])
    reader = summary["runs"][-1] if summary["runs"] else {}
    settings = cluster or {}
    labels = expected(setup, bool(settings.get("skip_lost_data")))
    if series == "issue-27-item-2":  # the labels the item-2 rows were kept with
        labels.pop("reader_reaches_end")
    row.update(
        series=series,
        seed=None,  # a real run
        rate=setup.get("rate"),
        produce_rate=captured.get("produce_rate"),
        batching=bool(setup.get("batching")),
        in_flight=setup.get("in_flight"),
        chaos=setup.get("chaos"),
        **settings,
        expected=labels,
        found={
            **{k: reader.get(k) for k in COUNTS},
            "valid": reader.get("valid"),
            **found_labels(reader),
            "dropped_resends": _dropped_resends(run_dir),
            "reader_reaches_end": captured["consume"].get("reached_end"),
        },
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--release", required=True, help="the Pulsar release the runs ran on")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "real-runs")
    parser.add_argument("--series", default="issue-27-item-2")
    parser.add_argument("--analyze", type=Path, help="analyze --json of capture-run results")
    parser.add_argument(
        "--session-expired", choices=("reconnect", "shutdown"), help="the cluster's, as started"
    )
    parser.add_argument("--autorecovery", action="store_true", help="the cluster ran it")
    parser.add_argument("--skip-lost-data", action="store_true", help="the brokers skipped")
    args = parser.parse_args()
    analyzed = json.loads(args.analyze.read_text()) if args.analyze else None
    settings = cluster_settings(args)

    def one(path: Path) -> dict:
        loaded = json.loads(path.read_text())
        # a capture with the shared analyze: a chaos run's result (pack_result keeps its rows)
        result = {**analyzed, "capture": loaded} if analyzed else loaded
        return keep(result, args.release, args.out, args.series, settings)

    keep_all((one(path) for path in args.results), args.out)


if __name__ == "__main__":
    main()
