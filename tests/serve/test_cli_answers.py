"""What the command line answers about the analyzed examples says what is true: an alert list
without a sink says so, `valid` reads as in --json, a wrong run id is named as such."""

from __future__ import annotations

import pytest
from serve_examples import SYNTHETIC_RUN

from jobs.cli import main
from jobs.commands.serve import no_sink_note
from pulsar_audit.delta_io import Lakehouse


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
