"""The benchmark's traces, made by the simulator: N messages over three simulated chaos runs.

    .venv/bin/python -m bench.simulated --messages 1e6 --seed 1 --out DIR [--gzip | --columnar]

The trace files (format v1, `trace-<run>-NNNNN.jsonl`) go to DIR, and only they: the
checkers compare what each computes from the trace alone. Each run's truth.json (the counts
`analyze` must report), logs and ZooKeeper capture go to DIR.truth/<run>/.

- PREFIX-owner, 40 % of the messages: `isolate-broker` (2-2-1, 3 brokers, 3 bookies), a topic of
  4 partitions, one producer each. The owner of the topic's bundle loses its ZooKeeper session;
  the producers reconnect on the client's backoff (outages), and the sends they retry after
  the failover are stored a second time (duplicates: deduplication is off). consumer-1 fails
  to ack 1 message in 500 (redelivered), reader-early stops before the end without `end`
  (unseen), a Shared subscription loses one of its two consumers mid-topic (its unacked
  messages reach the other after higher seqs: out of order, and redelivered), the active
  consumer of a Failover subscription disconnects (its unacked tail redelivered, in order, to
  the standby), and the harness records 1 ack pair in 10,000 out of order (non-monotonic
  acks).
- PREFIX-crash, 20 %: `kill-broker` on a non-partitioned topic (one producer): the topic's
  owner dies with acks on their way back (entry persisted → ack seen: 1.5 ms); the pending
  sends time out after 30 s (nacked, a 30 s outage), and one of them was stored before the
  crash and is delivered all the same (unacked received).
- PREFIX-quorum, 40 %: `kill-qw-bookies` (2-2-1, 4 bookies), 2 partitions. Both
  bookies of the current ensemble die: reader-1 blocks at the first unreadable entry (no
  `end`: what it missed is unseen; below ~50,000 messages per partition the whole topic is
  one ledger on those bookies, reader-1 gets nothing and leaves no line in the trace),
  reader-skip skips the hole (acked messages lost, a poll skip), consumer-1 reads everything
  after the bookies return.

Per-message data stays in Spark (the simulator's contract); the output is a function of
(messages, seed, prefix, gzip) alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench.counts import report

TRUTH_SUFFIX = ".truth"
# In a run's truth folder while its truth is computed: its trace files, written whole, with the
# options that made them (`--resume` then computes only the truth)
TRACE_WRITTEN = "trace-written.json"
# (run id suffix, share of the messages, partitions (0: a non-partitioned topic), options)
RUNS = (
    (
        "owner",
        0.4,
        4,
        {
            "scenario": "isolate-broker",
            "early_stop": 0.995,
            "shared_crash": 0.5,
            "failover_crash": 0.3,
            "callback_reorder_every": 10_000,
        },
    ),
    ("crash", 0.2, 0, {"scenario": "kill-broker", "ack_return_us": 1500}),
    ("quorum", 0.4, 2, {"scenario": "kill-qw-bookies", "bookies": 4, "auto_skip": True}),
)


def scenarios(messages: int, seed: int, prefix: str) -> list[dict[str, Any]]:
    """The runs' `simulate run` options for `messages` in all (each run at least 10 messages
    per partition, the simulator's least)."""
    return [
        {
            "run_id": f"{prefix}-{name}",
            "config": "2-2-1",
            "partitions": partitions,
            "messages": max(int(messages * share) // max(partitions, 1), 10),
            "seed": seed,
            **options,
        }
        for name, share, partitions, options in RUNS
    ]


def simulated_messages(messages: int) -> int:
    """How many messages the runs send in all: `messages` rounded down to whole partitions
    (at least 10 per partition)."""
    return sum(
        s["messages"] * max(s["partitions"], 1) for s in scenarios(messages, 1, prefix="bench")
    )


def _finished(truth: Path, out: Path, wanted: dict[str, Any], suffix: str) -> list[str] | None:
    """The trace files of a run whose simulation finished as `wanted` asks (`truth`, its
    truth.json, whole, with the same scenario, outage threshold and ladder, and every file it
    names of the form `suffix` and in its folder or in `out`); None for a run to simulate."""
    return _recorded(truth, wanted, suffix, (truth.parent, out))


def _written(folder: Path, wanted: dict[str, Any], suffix: str) -> list[str] | None:
    """The trace files a stopped simulation of the run in `folder` wrote whole with the same
    options (its TRACE_WRITTEN record; every file it names of the form `suffix` still in the
    folder), to be kept while only its truth is computed; None when there are none."""
    names = _recorded(folder / TRACE_WRITTEN, wanted, suffix, (folder,))
    return names or None


def _recorded(
    record: Path, wanted: dict[str, Any], suffix: str, places: tuple[Path, ...]
) -> list[str] | None:
    """The files `record` (JSON) names when it is whole, holds `wanted`'s options, and names
    only files of the form `suffix` that are in one of `places`; else None."""
    try:
        done = json.loads(record.read_text())
        names = done["files"]
        same = all(_plain(done.get(key)) == _plain(value) for key, value in wanted.items())
    except (OSError, ValueError, KeyError, TypeError):  # none, or cut short by a kill
        return None
    whole = all(n.endswith(suffix) and any((p / n).exists() for p in places) for n in names)
    return names if same and whole else None


def _mark_written(folder: Path, wanted: dict[str, Any], files: list[Path]) -> None:
    """Record the run's trace files as written (whole: a stop mid-write leaves none)."""
    record = {**wanted, "files": [f.name for f in files]}
    partial = folder / (TRACE_WRITTEN + ".partial")
    partial.write_text(json.dumps(record, default=str))
    partial.replace(folder / TRACE_WRITTEN)


def _plain(value: Any) -> Any:
    """`value` as truth.json holds it."""
    return json.loads(json.dumps(value, default=str))


def truth_folder(out: Path) -> Path:
    return out.with_name(out.name + TRUTH_SUFFIX)


def generate(
    spark: SparkSession,
    out: Path,
    messages: int,
    seed: int = 1,
    prefix: str = "bench",
    gzip: bool = False,
    threshold_ms: int = 100,
    ladder: list[int] | None = None,
    columnar: bool = False,
    resume: bool = False,
) -> list[Path]:
    """Simulate the runs; the trace files into `out`, the rest into `out`.truth/<run>/
    (both emptied first, unless `resume`). Returns the trace files.

    resume: keep each run an earlier generation into `out` finished with the same options
    (its truth.json written; its files moved into `out`, or moved now; any other file of the
    run in `out` removed) and simulate only the others, from scratch (a run is a function of
    its options alone: the same files as one whole generation). A run stopped after its trace
    files were written whole (TRACE_WRITTEN) keeps them and computes only its truth. For sizes
    whose simulation outlasts a process (10^8: hours)."""
    from simulate.run import DEFAULT_LADDER, TRUTH_FILE, simulate_run
    from simulate.scenario import scenario_from, validate

    if messages < 2:
        raise ValueError(f"messages must be >= 2, got {messages}")
    truths = truth_folder(out)
    if not resume:
        for folder in (out, truths):
            shutil.rmtree(folder, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for options in scenarios(messages, seed, prefix):
        folder = truths / options["run_id"]
        wanted = {
            "scenario": validate(scenario_from(options)).as_dict(),
            "outage_threshold_ms": threshold_ms,
            "backoff_ladder_ms": ladder or DEFAULT_LADDER,
        }
        suffix = ".parquet" if columnar else ".jsonl.gz" if gzip else ".jsonl"
        names = _finished(folder / TRUTH_FILE, out, wanted, suffix) if resume else None
        written = _written(folder, wanted, suffix) if resume and names is None else None
        if names is None and written is None:
            shutil.rmtree(folder, ignore_errors=True)
        for stale in out.glob(f"trace-{options['run_id']}-*"):
            if names is None or stale.name not in names:
                stale.unlink()
        if names is None:
            truth = simulate_run(
                spark,
                scenario_from(options),
                folder,
                threshold_ms,
                ladder,
                gzip,
                columnar,
                written=written,
                after_trace=lambda files, f=folder, w=wanted: _mark_written(f, w, files),
            )
            names = truth["files"]
            (folder / TRACE_WRITTEN).unlink(missing_ok=True)  # the truth says it now
        for name in names:
            if (folder / name).exists():
                (folder / name).rename(out / name)
            files.append(out / name)
    return files


def from_truth(out: Path) -> dict[str, Any]:
    """The simulator's truth for the runs behind the traces in `out`, in the checkers' report
    shape (records: 0, the truth does not count trace lines)."""
    runs, outages = [], {}
    for path in sorted(truth_folder(out).glob(f"*/{'truth.json'}")):
        truth = json.loads(path.read_text())
        runs += truth["runs"]
        if truth["outages"]:
            outages[(truth["run_id"], truth["topic"])] = len(truth["outages"])
    return report("truth", 0, runs, outages)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=float, required=True, help="messages in all (1e6 ok)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True, help="folder for the trace files")
    parser.add_argument("--prefix", default="bench", help="run ids PREFIX-owner, -crash, -quorum")
    parser.add_argument("--gzip", action="store_true", help="write *.jsonl.gz instead of *.jsonl")
    parser.add_argument(
        "--columnar", action="store_true", help="write *.parquet (the columnar form) instead"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the runs an interrupted generation into OUT finished; simulate the others",
    )
    args = parser.parse_args(argv)

    from bench.spark_session import local_spark
    from pulsar_audit.config import load_config

    started = time.monotonic()
    out = Path(args.out)
    pipeline = load_config("local").pipeline
    spark = local_spark(out.parent / ".bench-spark")
    files = generate(
        spark,
        out,
        int(args.messages),
        args.seed,
        args.prefix,
        args.gzip,
        pipeline.outage_threshold_ms,
        list(pipeline.backoff_ladder_ms),
        args.columnar,
        args.resume,
    )
    spark.stop()
    size = sum(f.stat().st_size for f in files)
    print(
        f"wrote {len(files)} files, {size / 1e6:,.1f} MB, {int(args.messages):,} messages in "
        f"{time.monotonic() - started:.1f} s to {out} (truth in {truth_folder(out)})"
    )


if __name__ == "__main__":
    main()
