"""`pulsar-audit simulate run | sweep`: protocol-grounded chaos runs with their ground truth."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.context import EXIT_OK, Context
from pulsar_audit.kinds import RUN_COUNTS
from pulsar_audit.output import format_table
from simulate.scenario import scenario_from, with_needed_bookies

# the text table: every count of truth.json, as `analyze` prints them
SUMMARY_FIELDS = ("subscription", *RUN_COUNTS, "valid")


def _scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario",
        required=True,
        help="control|unload|transfer|kill-broker|isolate-broker|kill-bookie|"
        "isolate-bookie|kill-bookies:N|kill-qw-bookies|partition-broker-from-bookies|"
        "wipe-bookie-disk|wipe-qw-bookies-disk",
    )
    p.add_argument(
        "--config", default="2-2-1", metavar="E-Qw-Qa", help="ledger E-Qw-Qa (default 2-2-1)"
    )
    p.add_argument(
        "--bookies",
        type=int,
        help="bookies in the cluster (default: 3, or the fewest the scenario runs on: E plus "
        "the bookies it kills, e.g. 4 for kill-qw-bookies on 2-2-1)",
    )
    p.add_argument("--brokers", type=int, default=3, help="brokers in the cluster (default 3)")
    p.add_argument(
        "--messages", type=int, default=2000, help="messages per producer (default 2000)"
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=0,
        help="partitions, one producer each (default 0: one non-partitioned topic)",
    )
    p.add_argument("--dedup", action="store_true", help="broker deduplication on")
    p.add_argument(
        "--seed", type=int, default=1, help="random seed: same seed, same run (default 1)"
    )
    p.add_argument("--run-id", help="run id (default sim-<scenario>-<seed>)")
    p.add_argument(
        "--fault-at",
        type=float,
        default=0.5,
        help="fraction of the messages sent when the fault hits (default 0.5)",
    )
    p.add_argument(
        "--in-flight", type=int, default=1000, help="producer max pending (default 1000)"
    )
    p.add_argument("--interval-us", type=int, default=1000, help="send interval (default 1000 µs)")
    p.add_argument("--latency-us", type=int, default=2000, help="least send→ack latency (2000 µs)")
    p.add_argument(
        "--ack-return-us",
        type=int,
        default=300,
        help="persisted → ack seen by the client (default 300 µs); sets how many "
        "pending messages a failed owner had already stored",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=30_000,
        help="metadata session timeout (default 30000)",
    )
    p.add_argument(
        "--session-expired",
        choices=("shutdown", "reconnect"),
        default="shutdown",
        help="isolate-broker: the owner's zookeeperSessionExpiredPolicy (default shutdown: it "
        "stops at once; reconnect, Pulsar 4.0's default: it keeps serving, closes cleanly)",
    )
    p.add_argument(
        "--bookie-restart-ms",
        type=int,
        default=0,
        help="kill-bookie(s): restart the killed bookies this long after the kill, with their "
        "data, as the harness does (12000); wipe-*-disk: restart them empty (required); "
        "must exceed the session timeout (default 0: they stay down)",
    )
    p.add_argument(
        "--partition-hold-ms",
        type=int,
        default=20_000,
        help="partition-broker-from-bookies: how long the owner cannot reach its bookies "
        "(default 20000, the harness's hold)",
    )
    p.add_argument("--entries-per-ledger", type=int, default=50_000, help="ledger rollover (50000)")
    p.add_argument(
        "--auto-skip",
        action="store_true",
        help="add a reader on a broker with autoSkipNonRecoverableData (skips unreadable data)",
    )
    p.add_argument(
        "--callback-reorder-every",
        type=int,
        default=0,
        help="inject: the harness records 1 ack pair in N out of order (default 0: never)",
    )
    p.add_argument(
        "--early-stop",
        type=float,
        default=0.0,
        help="add a reader that stops after this fraction, without end (default off)",
    )
    p.add_argument(
        "--shared-crash",
        type=float,
        default=0.0,
        metavar="F",
        help="add a Shared subscription sub-shared (shared-a, shared-b); shared-b disconnects "
        "after fraction F of the topic and its unacked messages go to shared-a (default off)",
    )
    p.add_argument(
        "--failover-crash",
        type=float,
        default=0.0,
        metavar="F",
        help="add a Failover subscription sub-failover; its active consumer failover-a "
        "disconnects after fraction F and the standby failover-b takes over (default off)",
    )
    p.add_argument(
        "--failover-bug",
        choices=("overlap",),
        help="inject: the broker keeps dispatching to failover-a for 2 ms after failover-b "
        "became active (two active consumers: failover_overlap)",
    )
    _key_shared_args(p)


def _key_shared_args(p: argparse.ArgumentParser) -> None:
    """Trace format v1.1's message keys and the Key_Shared subscription (simulate/key_shared.py)."""
    p.add_argument(
        "--keys",
        type=int,
        default=0,
        metavar="N",
        help="give message seq the key k<hash(seq) mod N> (default 0: no keys)",
    )
    p.add_argument(
        "--key-shared-consumers",
        type=int,
        default=0,
        metavar="N",
        help="add a Key_Shared subscription sub-keyshared with N consumers (needs --keys)",
    )
    p.add_argument(
        "--key-shared-mode",
        choices=("auto_split", "sticky"),
        help="auto_split (default: the hash space split evenly between the consumers present) "
        "or sticky (fixed ranges, --key-shared-ranges)",
    )
    p.add_argument(
        "--key-shared-ranges",
        metavar="B0,B1,...",
        help="sticky: the range boundaries, 0 … 65536, one range per consumer (default even)",
    )
    p.add_argument(
        "--key-shared-join",
        type=float,
        metavar="F",
        help="keyshared-<N+1> joins after fraction F of the topic (default none)",
    )
    p.add_argument(
        "--key-shared-leave",
        type=float,
        metavar="F",
        help="keyshared-1 leaves after fraction F; its unacked tail goes to the keys' new owners",
    )
    p.add_argument(
        "--key-shared-bug",
        choices=("reorder",),
        help="inject apache/pulsar's ordering bug on a join: keys moved to the joiner get "
        "newer messages before the old owner's in-flight ones (key_out_of_order)",
    )


def cmd_run(ctx: Context) -> int:
    from serve.summary import json_verdict
    from simulate.run import simulate_run

    args = vars(ctx.args)
    scenario = scenario_from(
        {k: args.get(k) for k in args if k not in ("handler", "out", "no_gzip", "columnar")}
    )
    if ctx.args.bookies is None:
        scenario = with_needed_bookies(scenario)
    pipeline = ctx.config.pipeline
    truth = simulate_run(
        ctx.spark,
        scenario,
        ctx.args.out,
        pipeline.outage_threshold_ms,
        list(pipeline.backoff_ladder_ms),
        gzip=not ctx.args.no_gzip,
        columnar=ctx.args.columnar,
        stuck_key_ms=pipeline.stuck_key_ms,
    )
    result = {k: truth[k] for k in ("run_id", "config", "faults", "runs", "outages", "generate_s")}
    result["out"] = ctx.args.out
    if ctx.args.json:  # truth.json's "true" / "false" / "unknown" → true / false / "unknown"
        result["runs"] = [{**run, "valid": json_verdict(run["valid"])} for run in result["runs"]]
    ctx.emit(result, _run_text)
    return EXIT_OK


def _run_text(result: dict[str, Any]) -> str:
    outages = ", ".join(
        f"{o['duration_ms']:.0f} ms (step {o['backoff_step']})" for o in result["outages"]
    )
    return (
        f"{result['run_id']} ({result['config']}) → {result['out']} in {result['generate_s']} s\n"
        f"{format_table(result['runs'], list(SUMMARY_FIELDS))}\noutages: {outages or 'none'}"
    )


def cmd_sweep(ctx: Context) -> int:
    from simulate.sweep import run_sweep

    pipeline = ctx.config.pipeline
    manifest = run_sweep(
        ctx.spark,
        ctx.args.grid,
        ctx.args.out,
        pipeline.outage_threshold_ms,
        list(pipeline.backoff_ladder_ms),
        limit=ctx.args.limit,
    )
    ctx.emit(manifest, lambda m: f"{m['done']} runs, {m['skipped']} skipped → {m['manifest']}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    simulate = sub.add_parser("simulate", help="simulate chaos runs with their ground truth")
    kinds = simulate.add_subparsers(dest="kind", metavar="KIND", required=True)
    run = kinds.add_parser(
        "run",
        parents=[common],
        help="simulate one run into DIR (trace files + truth.json)",
        description="Simulate one run following the Pulsar/BookKeeper protocols, generated in "
        "Spark: trace files (format v1) and truth.json, the counts, anomaly blocks and outages "
        "`analyze` must report, with their true causes.",
    )
    _scenario_args(run)
    run.add_argument("--out", required=True, metavar="DIR", help="folder for the run's files")
    run.add_argument(
        "--no-gzip", action="store_true", help="write the trace as plain .jsonl (default .jsonl.gz)"
    )
    run.add_argument(
        "--columnar",
        action="store_true",
        help="write the trace as .parquet, trace format v1's columnar form",
    )
    run.set_defaults(handler=cmd_run)
    sweep = kinds.add_parser(
        "sweep",
        parents=[common],
        help="simulate every combination of a grid, one folder each",
        description="GRID is a JSON or YAML mapping of option → list of values (keys as the "
        "`simulate run` options: scenario, config, bookies, brokers, messages, dedup, seed, …). "
        "Every combination is one run in DIR/<run_id>/; combinations the model refuses are "
        "listed as skipped. DIR/manifest.json lists every run with its truth counts.",
    )
    sweep.add_argument("--grid", required=True, metavar="FILE", help="the grid (JSON or YAML)")
    sweep.add_argument("--out", required=True, metavar="DIR", help="folder for the runs")
    sweep.add_argument("--limit", type=int, help="stop after this many runs")
    sweep.set_defaults(handler=cmd_sweep)
