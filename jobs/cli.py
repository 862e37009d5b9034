"""`pulsar-audit`: every stage's commands, and the main job `analyze`, wired in one place.

Exit codes: 0 ok; 1 anomalies found and --fail-on-anomaly given; 2 usage, config or input error.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from pulsar_audit import cli as core_cli
from pulsar_audit.cli import Context


def cmd_analyze(ctx: Context) -> int:
    """The main job: ingest everything under PATH, check, recompute, print every run."""
    from jobs.analyze import check_inputs
    from jobs.receipt import recorded_result
    from pipelines.cli import exit_code, render

    check_inputs(ctx.args.path)  # before Spark starts: a wrong path costs nothing
    # Nothing new since the last analyze: its recorded result, without starting Spark.
    result = recorded_result(ctx.config, ctx.args.path)
    if result is None:
        result = analyze_path(ctx, ctx.args.path)
    ctx.emit(result, render)
    return exit_code(ctx, result)


def analyze_path(ctx: Context, path: str | Path) -> dict[str, Any]:
    """`analyze` for a command's context (config and lakehouse already chosen).

    When Spark is not started yet, a small local input gets the small-input session.
    """
    from checks.gx import warm_up
    from jobs.analyze import analyze
    from pulsar_audit.spark import for_input, local_input_bytes

    if "spark" not in vars(ctx):  # Context.spark is built on first use
        ctx.config = for_input(ctx.config, local_input_bytes(str(path)))
        # the checks' GX context is built while the JVM starts (both take seconds)
        threading.Thread(target=warm_up, name="gx-warm-up", daemon=True).start()
    return analyze(ctx.lakehouse, ctx.config, path, ctx.progress())


def build_parser() -> argparse.ArgumentParser:
    from ingest import cli as ingest_cli
    from ingest.pulsar import cli as pulsar_cli
    from ingest.simulate import cli as simulate_cli
    from models import cli as models_cli
    from pipelines import cli as pipelines_cli
    from serve import cli as serve_cli

    parser = argparse.ArgumentParser(
        prog="pulsar-audit",
        description="Trace-replay anomaly detector for Apache Pulsar (PySpark on Delta Lake).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = core_cli.common_options()
    core_cli.register(sub, common)
    p = sub.add_parser(
        "analyze",
        parents=[common, pipelines_cli.fail_option()],
        help="main job: ingest, check and analyze traces, logs and ZooKeeper captures",
        description="Ingest the trace files, logs (logs/broker|bookie|client/) and ZooKeeper "
        "captures (*.zk.jsonl) under PATH, run the checks, the pipeline and the correlation, "
        "and print per (run, topic, subscription) the counts, the outages and the findings.",
    )
    p.add_argument("path", metavar="PATH", help="a trace file or a folder of captures")
    p.set_defaults(handler=cmd_analyze)
    for register in (
        ingest_cli.register,
        pipelines_cli.register,
        pulsar_cli.register,
        simulate_cli.register,
        serve_cli.register,
        models_cli.register,
    ):
        register(sub, common)
    return parser


def prepare_training_runs(ctx: Context) -> dict[str, Any]:
    """`risk train`'s inputs: real runs and (on an empty lakehouse) the default sweep."""
    from jobs.risk import prepare_training_runs as prepare

    return prepare(ctx)


def ingest_zk(ctx: Context, path: str) -> dict[str, Any]:
    from jobs.risk import ingest_zk as ingest

    return ingest(ctx, path)


JOBS = {
    "analyze": analyze_path,
    "prepare_training_runs": prepare_training_runs,
    "ingest_zk": ingest_zk,
}


def main(argv: list[str] | None = None) -> int:
    return core_cli.run(build_parser(), argv, JOBS)


if __name__ == "__main__":
    sys.exit(main())
