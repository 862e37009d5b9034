"""What the command line answers about the analyzed examples says what is true: an alert list
without a sink says so, `valid` reads as in --json, a wrong run id is named as such, `explain`
shows every finding of a run with repeated events as one row, `analyze PATH` shows PATH's runs."""

from __future__ import annotations

import importlib
import json

import pytest
from serve_examples import EXAMPLES, SYNTHETIC_RUN, UNLOAD_RUN

from jobs.cli import main
from jobs.commands.analyze import other_runs_note
from jobs.commands.serve import no_sink_note
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.spark import SMALL_INPUT_CONF, session_settings


def _cli(capsys, lakehouse: Lakehouse, *argv: str) -> tuple[int, str, str]:  # noqa: ANN001
    capsys.readouterr()
    code = main([*argv, "--lakehouse", str(lakehouse.config.lakehouse_path)])
    done = capsys.readouterr()
    return code, done.out, done.err


def _table(text: str, title: str) -> list[dict[str, str]]:
    """The rows of the text table printed under the line `title` (format_table's layout)."""
    lines = text.splitlines()
    header, dashes, *rest = lines[lines.index(title) + 1 :]
    spans, start = [], 0
    for dash in dashes.split("  "):
        spans.append((start, start + len(dash)))
        start += len(dash) + 2
    names = [header[a:b].strip() for a, b in spans]
    rows = []
    for line in rest:
        if not line.strip():
            break
        rows.append({n: line[a:b].strip() for n, (a, b) in zip(names, spans, strict=True)})
    return rows


def test_alerts_list_without_a_sink_says_no_sink_is_configured(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "alerts", "list")
    assert code == 0
    assert out.rstrip().splitlines()[-1] == no_sink_note("local")
    assert "alerts.sinks in conf/local.yaml is empty" in out
    assert "(none)" not in out


def test_summary_prints_valid_as_json_does(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "summary")
    assert code == 0
    rows = _table(out, "runs")
    assert "false" in {r["valid"] for r in rows if r["run_id"] == SYNTHETIC_RUN}  # lost acks
    assert {r["valid"] for r in rows} <= {"true", "false", "unknown"}


@pytest.mark.parametrize(
    ("run", "said"),
    [
        ("synthetic-fault", f"(near names: {SYNTHETIC_RUN})"),
        ("no-such-run", "(none is near; `pulsar-audit summary` lists its "),
    ],
)
def test_message_of_an_unknown_run_says_it_does_not_exist(examples_lakehouse, capsys, run, said):
    code, _, err = _cli(capsys, examples_lakehouse, "message", run, "--seq", "50")
    assert code == 2
    assert f"run {run!r} does not exist in this lakehouse {said}" in err
    assert "has `pipeline` run" not in err


def test_explain_of_a_run_shows_every_finding_of_the_run(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "explain", SYNTHETIC_RUN, "--json")
    assert code == 0
    result = json.loads(out)
    kinds = {
        r["kind"]
        for r in examples_lakehouse.read("anomalies").collect()
        if r["run_id"] == SYNTHETIC_RUN
    }
    assert {"redelivered", "out_of_order", "poll_skip", "unacked_received"} <= kinds
    shown = {r["event_type"] for r in result["timeline"] if r["source"] == "gold"}
    assert shown == kinds | {"outage"}
    # the deliveries at 10:00:04.4–04.6 are inside the run's window
    assert result["end"] >= "2025-03-04T10:00:04.6"

    code, out, _ = _cli(capsys, examples_lakehouse, "explain", SYNTHETIC_RUN)
    rows = [line.split() for line in out.splitlines() if "  gold  " in line]
    assert {row[3] if row[0] != "(no" else row[4] for row in rows} == kinds | {"outage"}


def test_explain_collapses_repeated_events_and_keeps_the_log_message(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "explain", UNLOAD_RUN, "--json")
    assert code == 0
    timeline = json.loads(out)["timeline"]
    writes = [r for r in timeline if r["event_type"] == "bookie_write_error"]
    assert len(writes) == 1 and writes[0]["count"] >= 180
    assert writes[0]["last_ts"] > writes[0]["ts"]
    assert len(timeline) < 50  # about 40 rows, not 200 cut from the 1000 write errors
    # acquired before the unload and again after it: two rows, not one burst
    owned = [r for r in timeline if r["event_type"] == "bundle_ownership_acquired"]
    assert [r["count"] for r in owned] == [1, 1]
    assert owned[0]["what"].startswith("OwnershipCache - Successfully acquired ownership")

    code, out, _ = _cli(capsys, examples_lakehouse, "explain", UNLOAD_RUN)
    [line] = [line for line in out.splitlines() if "bookie_write_error" in line]
    assert f"x{writes[0]['count']} until 2026-11-22T" in line


def test_the_real_unload_run_names_the_unload_as_the_outage_cause(examples_analyzed):
    """The committed real run: a trace and the broker log of a bundle unload on Pulsar 4.0.7,
    analyzed with the synthetic run (what `analyze examples` returned)."""
    from serve.explain import explain

    lakehouse, result = examples_analyzed
    assert result["infra"]["log_files"] == 2  # the unload run's broker log and client log
    assert {r["run_id"] for r in result["runs"]} == {SYNTHETIC_RUN, UNLOAD_RUN}  # one run each
    [run] = [r for r in result["runs"] if r["run_id"] == UNLOAD_RUN]
    assert (run["sent"], run["acked"], run["lost"], run["valid"]) == (4000, 4000, 0, True)
    outages = [o for o in result["outages"] if o["run_id"] == UNLOAD_RUN]
    unload = max(outages, key=lambda o: o["duration_ms"])
    first = unload["causes"][0]
    assert first["event_type"] == "bundle_unload_requested"
    assert "public/default/0x00000000_0x40000000" in first["reason"]
    assert first["host"] == "standalone"
    # `explain` merges trace, broker and client events around the outage on one clock.
    timeline = explain(lakehouse, UNLOAD_RUN, unload["outage_id"][:10])
    assert timeline["finding"]["id"] == unload["outage_id"]
    kinds = [(e["source"], e["event_type"]) for e in timeline["timeline"]]
    assert ("trace", "run_chaos") in kinds
    assert kinds.index(("broker", "bundle_unload_requested")) < kinds.index(
        ("client", "client_reconnect_scheduled")
    )
    # An outage that ended before the unload began is not blamed on it.
    early = [o for o in outages if o["end"] < first["ts"]]
    assert early and all(
        c["event_type"] not in ("bundle_unload_requested", "bundle_unload_started")
        for o in early
        for c in o["causes"]
    )


def test_message_keeps_the_log_message_as_explain_does(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "message", UNLOAD_RUN, "--seq", "967", "--json")
    assert code == 0
    events = {e["event_type"]: e for e in json.loads(out)["infra_events"]}
    unload = (
        "NamespacesBase - [null] Unloading namespace bundle public/default/0x00000000_0x40000000"
    )
    assert events["bundle_unload_requested"]["detail"] == unload  # no time, thread, level

    code, out, _ = _cli(capsys, examples_lakehouse, "message", UNLOAD_RUN, "--seq", "967")
    [line] = [line for line in out.splitlines() if "bundle_unload_requested" in line]
    assert line.rstrip().endswith(f"bundle_unload_requested {unload}")


def test_analyze_path_reports_the_runs_of_path_only(examples_lakehouse, capsys):
    synthetic = str(EXAMPLES / "synthetic")
    code, out, _ = _cli(capsys, examples_lakehouse, "analyze", synthetic)
    assert code == 0
    assert {r["run_id"] for r in _table(out, "runs")} == {SYNTHETIC_RUN}
    assert UNLOAD_RUN not in out
    lakehouse = examples_lakehouse.config.lakehouse_path
    assert other_runs_note(1, f" --lakehouse {lakehouse}") in out.splitlines()

    code, out, _ = _cli(capsys, examples_lakehouse, "analyze", synthetic, "--json")
    result = json.loads(out)
    assert (code, result["other_runs"]) == (0, 1)
    found = [*result["runs"], *result["outages"], *result["anomalies"]]
    assert found and {f["run_id"] for f in found} == {SYNTHETIC_RUN}


@pytest.mark.parametrize(
    ("command", "module", "job"),
    [
        (["analyze"], "jobs.analyze", "analyze"),
        (["ingest", "traces"], "jobs.ingest", "ingest_traces"),
    ],
)
def test_a_command_in_a_running_session_takes_the_input_settings_for_itself(
    spark, tmp_path, capsys, monkeypatch, command, module, job
):
    """In a process whose Spark session runs already (the warm server's; here the tests'), a
    small input's `analyze` or `ingest traces` runs with the small-input settings, and the
    session's own are back after it (`ingest traces` used to rebuild the session from the
    config, which set the config's values on it for good)."""
    own = {
        "spark.sql.shuffle.partitions": "3",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.codegen.factoryMode": "FALLBACK",
    }
    seen: dict[str, str] = {}
    owner = importlib.import_module(module)
    run = getattr(owner, job)

    def watched(lakehouse, *args):  # noqa: ANN001, ANN002, ANN202
        seen.update({key: lakehouse.spark.conf.get(key) for key in own})
        return run(lakehouse, *args)

    monkeypatch.setattr(owner, job, watched)
    root = tmp_path / "lh"
    with session_settings(spark, own):
        capsys.readouterr()
        code = main([*command, str(EXAMPLES / "synthetic"), "--lakehouse", str(root)])
        out = capsys.readouterr().out
        after = {key: spark.conf.get(key) for key in own}
    assert code == 0
    assert SYNTHETIC_RUN in out
    assert UNLOAD_RUN not in out
    assert seen == {key: SMALL_INPUT_CONF[key] for key in own}
    assert after == own


def _block(text: str, title: str) -> list[str]:
    """The lines under the line `title`, up to the next blank line."""
    lines = text.splitlines()
    rest = lines[lines.index(title) + 1 :]
    return rest[: rest.index("")] if "" in rest else rest


def test_tables_fit_100_columns_and_wide_shows_every_count(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "summary")
    assert code == 0
    tables = _block(out, "runs") + _block(out, "outages")
    assert max(len(line.rstrip()) for line in tables) <= 100
    runs = {r["run_id"]: r for r in _table(out, "runs")}
    # lost 3 + out_of_order 1 + poll_skip 4; unacked_received 1 + duplicated 5 + redelivered 2
    assert (runs[SYNTHETIC_RUN]["violations"], runs[SYNTHETIC_RUN]["info"]) == ("8", "8")
    assert "(counts per kind: --wide or --json)" in out.splitlines()

    code, out, _ = _cli(capsys, examples_lakehouse, "summary", "--wide")
    wide = {r["run_id"]: r for r in _table(out, "runs")}
    assert (wide[SYNTHETIC_RUN]["duplicated"], wide[SYNTHETIC_RUN]["topic"]) == (
        "5",
        "persistent://public/default/orders",
    )
    assert "producer" in _block(out, "outages")[0]


def test_runs_list_and_compare(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "runs", "list", "--json")
    assert code == 0
    assert {r["run_id"] for r in json.loads(out)["runs"]} == {SYNTHETIC_RUN, UNLOAD_RUN}
    code, out, _ = _cli(capsys, examples_lakehouse, "runs", "list")
    assert out.startswith("2 run(s)\n")
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 100

    code, out, _ = _cli(capsys, examples_lakehouse, "compare", SYNTHETIC_RUN, UNLOAD_RUN, "--json")
    assert code == 0
    result = json.loads(out)
    counts = {r["name"]: (r["a"], r["b"]) for r in result["counts"]}
    assert counts["sent"] == (300, 4000) and counts["lost"] == (3, 0)
    assert counts["valid"] == (False, True)
    outages = {r["name"]: (r["a"], r["b"]) for r in result["outages"]}
    assert outages["outages"] == (1, 2)
    assert round(outages["outage_ms_longest"][1]) == 409
    findings = sum(r["a"] for r in result["causes"])
    assert findings == 1 + len(
        [r for r in examples_lakehouse.read("anomalies").collect() if r["run_id"] == SYNTHETIC_RUN]
    )

    code, out, _ = _cli(capsys, examples_lakehouse, "compare", SYNTHETIC_RUN, UNLOAD_RUN)
    [lost] = [line.split() for line in _block(out, "counts") if line.startswith("lost ")]
    assert lost == ["lost", "3", "0"]
    code, _, err = _cli(capsys, examples_lakehouse, "compare", SYNTHETIC_RUN, "synthetic-fault")
    assert code == 2 and "run 'synthetic-fault' does not exist" in err


def test_messages_two_kinds_count_are_marked_in_the_output(examples_lakehouse, capsys):
    code, out, _ = _cli(capsys, examples_lakehouse, "summary", "--run", SYNTHETIC_RUN, "--json")
    marked = {
        (a["kind"], a["seq_from"]): a["also_counted_as"] for a in json.loads(out)["anomalies"]
    }
    assert marked[("poll_skip", 50)] == [{"kind": "lost", "seq_from": 50, "seq_to": 52}]
    assert marked[("lost", 50)] == [{"kind": "poll_skip", "seq_from": 50, "seq_to": 52}]
    assert marked[("poll_skip", 200)] == [{"kind": "out_of_order", "seq_from": 200, "seq_to": 200}]
    assert marked[("duplicated", 100)] == []
    code, out, _ = _cli(capsys, examples_lakehouse, "summary", "--run", SYNTHETIC_RUN)
    assert "    also counted as lost (seq 50–52) (docs/anomalies.md)" in out.splitlines()

    code, out, _ = _cli(capsys, examples_lakehouse, "message", SYNTHETIC_RUN, "--seq", "51")
    assert "    also counted as poll_skip (seq 50–52) (docs/anomalies.md)" in out.splitlines()

    code, out, _ = _cli(capsys, examples_lakehouse, "explain", SYNTHETIC_RUN, "--json")
    pairs = [(p["kinds"], p["seq_from"], p["seq_to"]) for p in json.loads(out)["overlaps"]]
    assert sorted(pairs) == [
        (["lost", "poll_skip"], 50, 52),
        (["out_of_order", "poll_skip"], 200, 200),
    ]
    code, out, _ = _cli(capsys, examples_lakehouse, "explain", SYNTHETIC_RUN)
    assert "- seq 50–52 of p1 (reader-1): counted as lost and as poll_skip" in out.splitlines()
