"""`pulsar-audit runs list` and `compare RUN_A RUN_B`: what the lakehouse holds, run by run."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.commands.run_tables import WIDE_HINT, run_table_rows, wide_option
from jobs.context import EXIT_OK, Context
from pulsar_audit.kinds import ANOMALY_KINDS
from pulsar_audit.output import format_table

# compare's counts always shown; a kind only when one of the runs has it (or with --wide)
ALWAYS_COMPARED = ("topics", "subscriptions", "sent", "acked", "nacked", "received", "valid")


def cmd_runs_list(ctx: Context) -> int:
    from serve.summary import run_rows

    wide = ctx.args.wide

    def text(result: dict[str, Any]) -> str:
        rows, columns = run_table_rows(result["runs"], wide)
        hint = "" if wide or not rows else f"\n{WIDE_HINT}"
        return f"{len({r['run_id'] for r in rows})} run(s)\n\n{format_table(rows, columns)}{hint}"

    ctx.emit({"runs": run_rows(ctx.lakehouse)}, text)
    return EXIT_OK


def render_compare(result: dict[str, Any], wide: bool = False) -> str:
    a, b = result["run_a"], result["run_b"]

    def table(rows: list[dict[str, Any]]) -> str:
        return format_table([{"": r["name"], a: r["a"], b: r["b"]} for r in rows], ["", a, b])

    counts = [
        r
        for r in result["counts"]
        if wide
        or r["name"] in ALWAYS_COMPARED
        or (r["name"] in ANOMALY_KINDS and (r["a"] or r["b"]))
    ]
    causes = "first cause of each finding (outages and anomaly blocks)\n" + table(result["causes"])
    return "\n\n".join(["counts\n" + table(counts), "outages\n" + table(result["outages"]), causes])


def cmd_compare(ctx: Context) -> int:
    from serve.compare import compare_runs

    args = ctx.args
    result = compare_runs(ctx.lakehouse, args.run_a, args.run_b)
    ctx.emit(result, lambda r: render_compare(r, args.wide))
    return EXIT_OK


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    wide = wide_option()
    p = sub.add_parser("runs", help="the runs the lakehouse holds")
    actions = p.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    q = actions.add_parser(
        "list",
        parents=[common, wide],
        help="every run: its counts and verdict per subscription",
        description="Print every (run, topic, subscription) of gold.run_summary: sent, acked, "
        "received, the violations and the information found, and the verdict.",
    )
    q.set_defaults(handler=cmd_runs_list)

    p = sub.add_parser(
        "compare",
        parents=[common, wide],
        help="two runs side by side: counts, outages, causes",
        description="Print two runs' counts (summed over their topics and subscriptions; the "
        "verdict is the worst), their outages (how many, total and longest ms) and how many "
        "of their findings correlation gave each first cause.",
    )
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.set_defaults(handler=cmd_compare)
