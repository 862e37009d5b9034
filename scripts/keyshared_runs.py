"""Keep `chaos run --json` results of live-consumer runs (issue 26 item 4) in data/real-runs.

    .venv/bin/python scripts/keyshared_runs.py RESULT.json [RESULT.json ...] --release 4.0.7

Each RESULT.json is what `pulsar-audit chaos run ... --json` printed: the capture (its run
folder under `out`) and what `analyze` reported for it. The run is packed and listed the way
`scripts/real_runs.py finish` does it (same archive layout, same manifest fields), with the
trace kept whole (a 5000-message run has more than `finish`'s 4000 lines per client) and,
on top, the live-consumer setup (subscription type, consumers, keys, churn, nacks, rate) and
the labels: what the scenario makes happen by design (`expected`) and what analyze found
(`found`: every count of the subscription's row). No second analyze: the run's own is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_runs import _pack, manifest_row  # noqa: E402

from pulsar_audit.paths import REPO_ROOT  # noqa: E402

COUNTS = (
    "sent", "acked", "nacked", "received", "lost", "unseen", "unacked_received", "duplicated",
    "redelivered", "out_of_order", "poll_skip", "nonmonotonic_send", "nonmonotonic_poll",
    "inconsistent_message_id", "shared_reordered", "failover_overlap", "key_out_of_order",
    "key_overlap", "stuck_key",
)  # fmt: skip
KEY_KINDS = ("key_out_of_order", "key_overlap", "stuck_key")


def expected(setup: dict, release: str) -> dict:
    """What the scenario makes happen by design, and what the release promises."""
    nack_every = setup.get("nack_every") or 0
    return {
        "nacked_by_consumers": setup["messages"] // nack_every if nack_every else 0,
        "redelivered_at_least": setup["messages"] // nack_every if nack_every else 0,
        "consumer_churn": setup.get("consumer_churn"),
        # 4.0.0+ has PIP-379 (apache/pulsar#23352): a key stays ordered and on one consumer.
        # Before it, #23307 / #21199 / #15705 are known: no expectation either way.
        "key_violations": 0 if int(release.split(".")[0]) >= 4 else None,
    }


def found_labels(reader: dict) -> dict:
    """acked_loss and duplicates as the reader saw them; a reader that stopped short (verdict
    unknown) cannot tell either, unless it saw it (a loss skipped, a message twice)."""
    stopped_short = reader.get("valid") == "unknown"
    lost, duplicated = bool(reader.get("lost")), bool(reader.get("duplicated"))
    return {
        "acked_loss": None if stopped_short and not lost else lost,
        "duplicates": None if stopped_short and not duplicated else duplicated,
    }


def pack_result(result_path: Path | dict, release: str, out: Path) -> tuple[dict, dict, dict, dict]:
    """Pack the run of one `chaos run --json` result (its file, or the result itself) into
    `out`, the trace whole: (its capture, its analyze, its config event, its manifest row
    before the labels)."""
    result = result_path if isinstance(result_path, dict) else json.loads(result_path.read_text())
    captured = result["capture"]
    run_dir, run_id = Path(captured["out"]), captured["run_id"]
    summary = {
        key: [r for r in result[key] if r["run_id"] == run_id]
        for key in ("runs", "outages", "anomalies")
    }
    _pack(run_dir, summary, out / f"{run_id}.tar.gz", keep=10**9)
    row = manifest_row(run_dir, summary, release)
    setup = next(
        json.loads(line)
        for path in run_dir.glob("*.jsonl")
        for line in path.open()
        if '"event":"config"' in line
    )
    return captured, summary, setup, row


def keep(result_path: Path, release: str, out: Path) -> dict:
    captured, summary, setup, row = pack_result(result_path, release, out)
    sub = next((r for r in summary["runs"] if r.get("subscription_type") == "Key_Shared"), None)
    sub = sub or (summary["runs"][-1] if summary["runs"] else {})
    row.update(
        subscription_type=setup.get("subscription_type"),
        consumers=setup.get("consumers"),
        keys=setup.get("keys"),
        ordering_keys=setup.get("ordering_keys"),
        nack_every=setup.get("nack_every"),
        consumer_churn=setup.get("consumer_churn"),
        rate=setup.get("rate"),
        chaos=setup.get("chaos"),
        churn=(captured.get("churn") or {}).get("steps"),
        seed=None,  # a real run: no seed
        series="issue-26-item-4",
        expected=expected(setup, release),
        found={
            **{k: sub.get(k) for k in COUNTS},
            "valid": sub.get("valid"),
            "unchecked": sub.get("unchecked"),
            "key_kinds": {k: sub.get(k) for k in KEY_KINDS},
            "consumer_nacks": captured["consume"].get("nacked"),
            "consumers_reached_end": captured["consume"].get("reached_end"),
            "backlog_left": captured["consume"].get("backlog_left"),
        },
    )
    row["readers"] = [{k: r.get(k) for k in ("subscription", "subscription_type", *COUNTS,
                                             "valid")} for r in summary["runs"]]  # fmt: skip
    return row


def main(keep_run: Callable[[Path, str, Path], dict] = keep, doc: str = __doc__) -> None:
    """Keep every RESULT.json given with `keep_run` (this series' labels by default)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--release", required=True, help="the Pulsar release the runs ran on")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "real-runs")
    args = parser.parse_args()
    keep_all((keep_run(path, args.release, args.out) for path in args.results), args.out)


def keep_all(new_rows: Iterable[dict], out: Path) -> None:
    """Add (or replace, by run id) `new_rows` in `out`'s manifest, sorted by run id."""
    manifest = out / "manifest.jsonl"
    rows = {}
    for line in manifest.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["run_id"]] = row
    for row in new_rows:
        rows[row["run_id"]] = row
        found = row["found"]
        print(f"{row['run_id']}: kept ({found['received']} received, {found['lost']} lost, "  # noqa: T201
              f"{found['duplicated']} duplicated)")  # fmt: skip
    manifest.write_text("".join(json.dumps(r, default=str) + "\n" for _, r in sorted(rows.items())))
    print(f"manifest has {len(rows)} runs")  # noqa: T201


if __name__ == "__main__":
    main()
