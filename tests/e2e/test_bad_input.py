"""Bad input gets a clear word and an exit code (issue 28 item 4): quarantined records and
unrecognized log lines are counted with the command that lists them, `--fail-on-quarantine`
exits 1, and an "unknown" verdict prints its reason. The real CLI, in process."""

from __future__ import annotations

import json
import random
from pathlib import Path

from literal_runs import T0_MS, RunSpec, write_run

from jobs.cli import main
from jobs.commands.analyze import quarantine_note

BROKEN_JSON = [
    '{"run_id": "r", "role": "producer", "event": "send"',
    "not json at all",
    '{"run_id": 1, "topic": [], "role": 5}',
]


def _garbage(folder: Path) -> int:
    """Random bytes and broken JSON as two trace files; how many lines they hold."""
    folder.mkdir(parents=True)
    # no line breaks but \n: Spark's text reader also splits at \r
    alphabet = [b for b in range(1, 256) if b != 13]
    noise = bytes(random.Random(28).choice(alphabet) for _ in range(4000))
    lines = [line for line in noise.split(b"\n") if line.strip()]
    (folder / "noise.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (folder / "broken.jsonl").write_text("\n".join(BROKEN_JSON * 3) + "\n")
    return len(lines) + 3 * len(BROKEN_JSON)


def _cli(capsys, *argv: str) -> tuple[int, str]:  # noqa: ANN001
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_a_folder_of_garbage_points_to_the_quarantine(spark, tmp_path: Path, capsys):
    folder, lakehouse = tmp_path / "garbage", ["--lakehouse", str(tmp_path / "lh")]
    lines = _garbage(folder)

    code, out = _cli(capsys, "analyze", str(folder), *lakehouse)
    assert code == 0
    pointer = quarantine_note({"records": lines, "files": 2}, f" --lakehouse {tmp_path / 'lh'}")
    assert pointer in out.splitlines()
    assert f"{lines} record(s) of 2 input file(s) quarantined" in pointer
    assert "`pulsar-audit quarantine list --lakehouse " in pointer

    # asked to fail on quarantine: exit 1, and the same counts in --json (a rerun: nothing new)
    code, out = _cli(capsys, "analyze", str(folder), "--fail-on-quarantine", "--json", *lakehouse)
    assert code == 1
    assert json.loads(out)["quarantine"] == {"records": lines, "files": 2}

    code, out = _cli(capsys, "quarantine", "list", *lakehouse)
    assert code == 0
    assert out.startswith(f"{lines} quarantined record(s)\n")
    broken = [line for line in out.splitlines() if "broken.jsonl" in line]
    assert len(broken) == 3 * len(BROKEN_JSON)
    assert any("not json at all" in line for line in broken)


def test_an_unknown_verdict_prints_why_and_unrecognized_logs_are_counted(
    spark, tmp_path: Path, capsys
):
    folder, lakehouse = tmp_path / "in", ["--lakehouse", str(tmp_path / "lh")]
    write_run(folder, RunSpec("run-held", messages=20))
    # a send without its seq: quarantined, so run-held's events cannot support a verdict
    send = {"run_id": "run-held", "topic": "t", "role": "producer", "client": "p1"}
    (folder / "run-held-extra.jsonl").write_text(json.dumps({**send, "ts": T0_MS}) + "\n")
    (folder / "logs" / "broker").mkdir(parents=True)
    garbage = [f"line {n} of something that is no broker log" for n in range(7)]
    (folder / "logs" / "broker" / "broker.log").write_text("\n".join(garbage) + "\n")

    code, out = _cli(capsys, "analyze", str(folder), *lakehouse)
    assert code == 0
    why = [line for line in out.splitlines() if line.startswith("- [run-held] reader-1 on ")]
    assert len(why) == 1 and ": unknown because " in why[0]
    assert why[0].split("unknown because ")[1].strip()
    assert "`pulsar-audit quarantine list --lakehouse " in out
    assert "log lines not recognized: 7 broker; `pulsar-audit logs unmatched --lakehouse " in out

    code, out = _cli(capsys, "quarantine", "list", "run-held", "--json", *lakehouse)
    listed = json.loads(out)
    assert (code, listed["run_id"], listed["total"]) == (0, "run-held", 1)
    assert listed["rows"][0]["source_file"].endswith("run-held-extra.jsonl")

    # a second PATH with logs of its own: its logs section counts its own lines only
    other = tmp_path / "next"
    write_run(other, RunSpec("run-next", messages=5))
    (other / "logs" / "broker").mkdir(parents=True)
    (other / "logs" / "broker" / "broker.log").write_text("\n".join(garbage[:3]) + "\n")
    code, out = _cli(capsys, "analyze", str(other), *lakehouse)
    assert code == 0
    assert "log lines not recognized: 3 broker; `pulsar-audit logs unmatched --lakehouse " in out
    assert "(3 lines, 3 not log entries)" in out
