"""`pulsar-audit`: the command line. Builds the parser from the command groups in
jobs/commands/ and runs the chosen command (jobs/context.py).

Exit codes: 0 ok; 1 anomalies found and --fail-on-anomaly given (or records quarantined and
--fail-on-quarantine given); 2 usage, config or input error.
"""

from __future__ import annotations

import argparse
import sys

from jobs import context


def build_parser() -> argparse.ArgumentParser:
    # each group imports what its commands need only when they run: --help stays fast
    from jobs.commands import (
        analyze,
        capture,
        ingest,
        quarantine,
        risk,
        runs,
        serve,
        server,
        simulate,
        watch,
    )

    parser = argparse.ArgumentParser(
        prog="pulsar-audit",
        description="Trace-replay anomaly detector for Apache Pulsar (PySpark on Delta Lake).",
        epilog=(
            "What each anomaly kind means, how it is counted and whether it breaks the "
            "verdict: docs/anomalies.md."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = context.common_options()
    for register in (
        context.register,  # init
        analyze.register,  # analyze, pipeline, explain, summary
        ingest.register,
        capture.register_zk,
        serve.register_logs,
        capture.register,  # cluster, capture, chaos
        simulate.register,
        serve.register,  # alerts, message, sql, report
        quarantine.register,
        runs.register,  # runs list, compare
        risk.register,
        server.register,  # server start|stop|status, shell
        watch.register,  # watch
    ):
        register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    from jobs.warm import answer_from_server

    answered = answer_from_server(sys.argv[1:] if argv is None else argv)
    return context.run(build_parser(), argv) if answered is None else answered


if __name__ == "__main__":
    sys.exit(main())
