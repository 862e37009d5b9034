"""`pulsar-audit analyze | pipeline | explain | summary`: the main job and its scheduled stages."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from jobs.commands.run_tables import WIDE_HINT, outage_columns, run_table_rows, wide_option
from jobs.context import EXIT_ANOMALIES, EXIT_OK, Context
from pulsar_audit.output import format_table
from serve.overlaps import overlap_note, with_overlaps
from serve.recognition import describe_recognition

MAX_EXPLANATIONS = 20
WHAT_WIDTH = 140


def _first_cause(finding: dict[str, Any]) -> str:
    causes = finding.get("causes") or []
    return f"\n    probable cause: {causes[0]['reason']}" if causes else ""


def same_lakehouse(args: argparse.Namespace) -> str:
    """The options that name this command's lakehouse, to repeat in a suggested command."""
    options = [("--env", args.env), ("--lakehouse", args.lakehouse), ("--catalog", args.catalog)]
    options.append(("--schema-prefix", args.schema_prefix))
    return "".join(f" {name} {shlex.quote(value)}" for name, value in options if value)


def quarantine_note(counts: dict[str, int], again: str = "") -> str:
    """What analyze says when records of its input were refused, and where to see them."""
    return (
        f"{counts['records']:,} record(s) of {counts['files']:,} input file(s) quarantined, "
        f"not analyzed: `pulsar-audit quarantine list{again}` shows file, line, reason and text"
    )


def unrecognized_note(recognized: list[dict[str, Any]], again: str = "") -> str | None:
    """The log lines no pattern knew, per source, and the command that groups them."""
    missed = {
        r["source"]: r["entries"] - r["recognized"] + r["not_log_entries"] for r in recognized
    }
    counts = ", ".join(f"{n:,} {source}" for source, n in missed.items() if n)
    if not counts:
        return None
    return (
        f"log lines not recognized: {counts}; `pulsar-audit logs unmatched{again}` groups "
        "them into templates"
    )


def other_runs_note(count: int, again: str = "") -> str:
    """analyze shows the runs of its PATH: how many more the lakehouse holds."""
    return f"the lakehouse holds {count:,} other run(s): `pulsar-audit summary{again}` lists all"


def why_unknown_lines(result: dict[str, Any]) -> list[str]:
    """One line per (run, topic, subscription) whose verdict is unknown, with its reasons."""
    return [
        f"- [{u['run_id']}] {u['subscription']} on {u['topic']}: unknown because "
        + "; ".join(u["reasons"] or ["(no reason recorded)"])
        for u in result.get("why_unknown", [])
    ]


def render(result: dict[str, Any], again: str = "", wide: bool = False) -> str:
    """The people's view of an analyze/summary result: runs, outages, explained anomalies.

    again: the options naming the lakehouse, repeated in the commands the text suggests;
    wide: every count in the tables (else they fit 100 columns).
    """
    parts = []
    if "ingest" in result:
        ingest = "ingest\n" + format_table([result["ingest"]])
        if result.get("quarantine", {}).get("records"):
            ingest += "\n" + quarantine_note(result["quarantine"], again)
        parts.append(ingest)
    rows, columns = run_table_rows(result["runs"], wide)
    runs = "runs\n" + format_table(rows, columns)
    others = [other_runs_note(result["other_runs"], again)] if result.get("other_runs") else []
    hint = [] if wide or not rows else [WIDE_HINT]
    notes = [*why_unknown_lines(result), *others, *hint]  # below the table, after a blank line
    parts.append("\n\n".join([runs, "\n".join(notes)]) if notes else runs)
    parts.append("outages\n" + format_table(result["outages"], outage_columns(wide)))
    if result.get("recognized"):
        lines = [describe_recognition(r) for r in result["recognized"]]
        note = unrecognized_note(result["recognized"], again)
        parts.append("logs\n" + "\n".join(lines + ([note] if note else [])))
    explained = [
        f"- [{o['run_id']}] outage of {o['duration_ms']:.0f} ms at {o['start']}{_first_cause(o)}"
        for o in result["outages"]
        if o.get("causes")
    ]
    explained += [
        f"- [{a['run_id']}] {a['kind']}: {a['explanation']}{_first_cause(a)}{_overlaps(a)}"
        for a in result.get("anomalies", [])
    ]
    if explained:
        more = len(explained) - MAX_EXPLANATIONS
        lines = explained[:MAX_EXPLANATIONS] + ([f"... and {more} more"] if more > 0 else [])
        parts.append("findings\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _overlaps(finding: dict[str, Any]) -> str:
    note = overlap_note(finding)
    return f"\n    {note}" if note else ""


def marked(result: dict[str, Any]) -> dict[str, Any]:
    """`result` with each anomaly's `also_counted_as` (the kinds that count its messages too):
    a result recorded by an analyze from before they were marked may lack them."""
    return {**result, "anomalies": with_overlaps(result.get("anomalies", []))}


def exit_code(ctx: Context, result: dict[str, Any]) -> int:
    """1 when asked to fail on anomalies and a run is invalid or cannot be judged, or asked to
    fail on quarantine and a record of the input was quarantined.

    Informational findings (unacked_received, redelivery) alone do not fail a run.
    """
    quarantined = result.get("quarantine", {}).get("records", 0)
    if getattr(ctx.args, "fail_on_quarantine", False) and quarantined:
        return EXIT_ANOMALIES
    if not getattr(ctx.args, "fail_on_anomaly", False):
        return EXIT_OK
    failing = any(run["valid"] is not True for run in result["runs"])
    return EXIT_ANOMALIES if failing else EXIT_OK


def cmd_analyze(ctx: Context) -> int:
    """The main job: ingest everything under PATH, check, recompute, print PATH's runs."""
    from ingest.inputs import check_inputs
    from jobs.analyze import analyze_path
    from jobs.receipt import recorded_result

    files = check_inputs(ctx.args.path)  # before Spark starts: a wrong path costs nothing
    # Nothing new since the last analyze: its recorded result, without starting Spark.
    result = recorded_result(ctx.config, ctx.args.path, files)
    if result is None:
        result = analyze_path(ctx, ctx.args.path)
    again, wide = same_lakehouse(ctx.args), ctx.args.wide
    ctx.emit(marked(result), lambda r: render(r, again, wide))
    return exit_code(ctx, result)


def cmd_pipeline(ctx: Context) -> int:
    from jobs.analyze import refresh_gold
    from jobs.ingest import check_stale_runs

    # a lakehouse that has only been ingested into has no silver and gold tables yet
    ctx.lakehouse.create_all()
    # one job at a time writes what analyze writes (analyze holds the lock throughout)
    with ctx.lakehouse.exclusive("ingest"):
        requested = requested_runs(ctx.args)
        # a run a `watch` ingested is table-checked once it has ended: before its verdict here
        check_stale_runs(ctx.lakehouse, requested, ctx.progress())
        runs = refresh_gold(ctx.lakehouse, ctx.config, requested, ctx.progress())
    ctx.emit(
        {"recomputed": runs},
        lambda r: (
            f"recomputed {len(runs)} run(s): {', '.join(runs)}"
            if runs
            else "no run changed since the last computation"
        ),
    )
    return EXIT_OK


def requested_runs(args: argparse.Namespace) -> list[str] | None:
    """The runs named by --run (repeatable) and --runs (comma-separated); None: every run."""
    runs = list(args.run or [])
    runs += [r.strip() for r in (args.runs or "").split(",") if r.strip()]
    return sorted(set(runs)) or None


def cmd_summary(ctx: Context) -> int:
    from serve.summary import summary_report

    result = summary_report(ctx.lakehouse, ctx.args.run or None)
    again, wide = same_lakehouse(ctx.args), ctx.args.wide
    ctx.emit(result, lambda r: render(r, again, wide))
    return exit_code(ctx, result)


def cmd_explain(ctx: Context) -> int:
    from serve.explain import explain

    result = explain(ctx.lakehouse, ctx.args.run_id, ctx.args.anomaly)
    ctx.emit(result, render_timeline)
    return EXIT_OK


def render_timeline(result: dict[str, Any]) -> str:
    head = f"run {result['run_id']}: {result['start']} .. {result['end']}"
    finding = result.get("finding")
    if finding:
        head += f"\n{finding['kind']} {finding['id'][:12]}: {finding['explanation']}"
        head += "".join(f"\n  cause: {c['reason']}" for c in finding["causes"])
    columns = ["ts", "source", "host", "event_type", "what"]
    rows = [
        {**row, "ts": row["ts"] or "(no time)", "what": event_text(row, row["what"])}
        for row in result["timeline"]
    ]
    return head + "\n\n" + format_table(rows, columns) + _overlap_lines(result["overlaps"])


def _overlap_lines(pairs: list[dict[str, Any]]) -> str:
    """The messages two kinds count (docs/anomalies.md), after the timeline."""
    lines = [
        f"- seq {p['seq_from']}"
        + ("" if p["seq_to"] == p["seq_from"] else f"–{p['seq_to']}")
        + f" of {p['producer']} ({p['subscription']}): counted as {' and as '.join(p['kinds'])}"
        for p in pairs
    ]
    if not lines:
        return ""
    return "\n\none fact under two kinds (docs/anomalies.md)\n" + "\n".join(lines)


def event_text(event: dict[str, Any], text: str | None) -> str:
    """An infrastructure event's text (`explain`, `message`), cut to WHAT_WIDTH; a burst of
    repeats (`count`, `last_ts`) says how many until when."""
    if event["count"] != 1:
        until = event["last_ts"].isoformat(timespec="milliseconds")
        text = f"x{event['count']} until {until}: {text or ''}"
    return (text or "")[:WHAT_WIDTH]


def fail_option() -> argparse.ArgumentParser:
    fail = argparse.ArgumentParser(add_help=False)
    fail.add_argument(
        "--fail-on-anomaly",
        action="store_true",
        help="exit 1 if any run has an anomaly or is not known to be valid",
    )
    return fail


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    fail, wide = fail_option(), wide_option()
    p = sub.add_parser(
        "analyze",
        parents=[common, fail, wide],
        help="main job: ingest, check and analyze traces, logs and ZooKeeper captures",
        description="Ingest the trace files, logs (logs/broker|bookie|client/) and ZooKeeper "
        "captures (*.zk.jsonl) under PATH, run the checks, the pipeline and the correlation, "
        "and print per (run, topic, subscription) of PATH the counts, the outages and the "
        "findings, and how many other runs the lakehouse holds.",
    )
    p.add_argument("path", metavar="PATH", help="a trace file or a folder of captures")
    p.add_argument(
        "--fail-on-quarantine",
        action="store_true",
        help="exit 1 if any record of PATH was quarantined (`quarantine list` shows them)",
    )
    p.set_defaults(handler=cmd_analyze)
    p = sub.add_parser(
        "pipeline", parents=[common], help="recompute silver and gold for changed runs"
    )
    p.add_argument(
        "--run", action="append", metavar="RUN_ID", help="recompute this run (repeatable)"
    )
    p.add_argument(
        "--runs",
        metavar="RUN_IDS",
        help="recompute these runs, comma-separated (one job parameter for a backfill)",
    )
    p.set_defaults(handler=cmd_pipeline)
    p = sub.add_parser(
        "explain",
        parents=[common],
        help="the merged timeline around a run or one finding",
        description="Print client (trace), broker, bookie and ZooKeeper events on one corrected "
        "clock around RUN, or around one anomaly or outage (--anomaly: an id or its prefix).",
    )
    p.add_argument("run_id", metavar="RUN")
    p.add_argument("--anomaly", metavar="ID", help="anomaly_id or outage_id (a prefix is enough)")
    p.set_defaults(handler=cmd_explain)
    p = sub.add_parser("summary", parents=[common, fail, wide], help="print the verdicts in gold")
    p.add_argument("--run", action="append", metavar="RUN_ID", help="only this run (repeatable)")
    p.set_defaults(handler=cmd_summary)
