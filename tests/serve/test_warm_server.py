"""The warm server (`pulsar-audit server start|stop|status`, `shell`) through the real CLI: a
question it answers prints what the cold CLI prints, with the same exit code; it stops when
told and when idle; without it a question still answers, cold, and starts no server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from json_schema_check import validate
from serve_examples import EXAMPLES, SYNTHETIC_RUN

from bench.warm_analyze import timeless
from jobs.cli import main
from jobs.commands.server import status_text
from jobs.server_control import process_alive
from jobs.server_link import socket_path
from jobs.warm import MODE_VARIABLE

EXE = Path(sys.executable).parent / "pulsar-audit"
QUESTIONS = [
    ["sql", "select run_id, kind, seq_from, seq_to from gold.anomalies order by 1, 2, 3"],
    ["message", SYNTHETIC_RUN, "--seq", "50"],
    ["message", "synthetic-fault", "--seq", "50"],  # a wrong run: exit 2 and near names
]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != MODE_VARIABLE}
    return {**env, **extra}


def _cli(*argv: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
    """The real command line in its own process (the warm path's client)."""
    return subprocess.run(
        [str(EXE), *argv], input=stdin, capture_output=True, text=True, timeout=600,
        env=_env(**env), check=False,
    )  # fmt: skip


def _status(root: Path) -> dict:
    done = _cli("server", "status", "--lakehouse", str(root), "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    validate(status, "server_status")
    return status


def _gone(pid: int) -> bool:
    return not process_alive(pid)


@pytest.fixture(scope="module")
def server(examples_lakehouse):
    """A server started on the analyzed examples; stopped (its pid killed at worst) after."""
    root = examples_lakehouse.config.lakehouse_path
    done = _cli("server", "start", "--lakehouse", str(root), "--idle-timeout", "600", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    validate(status, "server_start")
    yield root, status
    _cli("server", "stop", "--lakehouse", str(root))
    if not _gone(status["pid"]):
        os.kill(status["pid"], 9)


def test_a_question_through_the_server_is_answered_as_the_cold_cli_answers(
    server, capsys, monkeypatch
):
    root, started = server
    assert started["running"] and started["lakehouse"] == str(root)
    before = _status(root)["questions"]
    monkeypatch.setenv(MODE_VARIABLE, "off")
    codes = []
    for question in QUESTIONS:
        warm = _cli(*question, "--lakehouse", str(root))
        codes.append(warm.returncode)
        capsys.readouterr()
        cold_code = main([*question, "--lakehouse", str(root)])
        cold = capsys.readouterr()
        assert (warm.returncode, warm.stdout) == (cold_code, cold.out), question
        assert warm.stderr == cold.err, question
    assert codes == [0, 0, 2]
    assert _status(root)["questions"] == before + len(QUESTIONS)


def test_the_shell_answers_many_questions_in_one_session_and_keeps_history(server, tmp_path):
    root, _ = server
    history = tmp_path / "history"
    lines = ['sql "select count(*) as n from gold.run_summary"', "summary --json", "exit"]
    before = _status(root)["questions"]
    done = _cli(
        "shell", "--lakehouse", str(root), stdin="\n".join(lines) + "\n",
        PULSAR_AUDIT_HISTORY=str(history),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table, summary = done.stdout.split("\n", 3)[:3], done.stdout.split("\n", 3)[3]
    assert table == ["n", "-", "2"]
    assert {r["run_id"] for r in json.loads(summary)["runs"]} >= {SYNTHETIC_RUN}
    assert history.read_text().splitlines() == lines
    assert _status(root)["questions"] == before + 2  # both answered by the running server


def test_analyze_goes_to_the_running_server_and_prints_what_it_prints_without_one(
    server, capsys, monkeypatch
):
    """`analyze` of a lakehouse whose server runs goes to the server (one of its questions) and
    prints what it prints without one: here examples/synthetic again, which takes in nothing.
    (A whole job through a server on a new lakehouse, the server busy meanwhile and a question
    then answered cold: the long tier's
    test_analyze_through_a_running_server_does_what_the_cold_job_does.)"""
    root, _ = server
    synthetic = str(EXAMPLES / "synthetic")
    before = _status(root)["questions"]
    warm = _cli("analyze", synthetic, "--json", "--lakehouse", str(root))
    assert warm.returncode == 0, warm.stderr
    assert _status(root)["questions"] == before + 1  # the server ran it
    monkeypatch.setenv(MODE_VARIABLE, "off")
    capsys.readouterr()
    assert main(["analyze", synthetic, "--json", "--lakehouse", str(root)]) == 0
    without = json.loads(capsys.readouterr().out)
    result = json.loads(warm.stdout)
    assert result["ingest"] == dict.fromkeys(result["ingest"], 0)  # nothing new
    assert {r["run_id"] for r in result["runs"]} == {SYNTHETIC_RUN} and result["anomalies"]
    assert timeless(result) == timeless(without)


def test_stop_ends_the_server_and_a_question_then_answers_cold(server, capsys):
    root, started = server
    done = _cli("server", "stop", "--lakehouse", str(root), "--json")
    assert done.returncode == 0, done.stderr
    stopped = json.loads(done.stdout)
    validate(stopped, "server_stop")
    assert stopped["stopped"] is True
    assert _gone(started["pid"])
    assert status_text(stopped).startswith(f"stopped the server of {root} (pid {started['pid']}")
    assert _status(root) == {"running": False, "lakehouse": str(root)}
    said = _cli("server", "status", "--lakehouse", str(root)).stdout
    assert said == f"no server runs for {root}\n"
    assert not socket_path(root).exists()
    capsys.readouterr()  # in-process, not at a terminal, mode unset: cold, and no server started
    assert (
        main(["sql", "select count(*) as n from gold.run_summary", "--lakehouse", str(root)]) == 0
    )
    assert capsys.readouterr().out.splitlines() == ["n", "-", "2"]
    assert not socket_path(root).exists()


def _busy_status(root: Path, job: subprocess.Popen) -> dict:
    """The server's status once it says it runs a job (while `job`, its client, runs)."""
    deadline = time.monotonic() + 120
    while job.poll() is None and time.monotonic() < deadline:
        status = _status(root)
        if "busy" in status:
            return status
        time.sleep(0.2)
    raise AssertionError(f"the server never said it was busy; the client ended with {job.poll()}")


# long tier; in the default run: test_analyze_goes_to_the_running_server_and_prints_what_it_
# prints_without_one (a rerun through the module's server)
@pytest.mark.long
def test_analyze_through_a_running_server_does_what_the_cold_job_does(tmp_path, capsys):
    """`analyze` goes to the lakehouse's running server (one of its questions) and finds,
    prints and writes what a cold `analyze` does; while it runs, the server says so and a
    question is answered cold; the server's next answers read what it wrote; the same
    `analyze` again takes in nothing and gives the same findings."""
    synthetic = str(EXAMPLES / "synthetic")
    cold_root, warm_root = tmp_path / "cold", tmp_path / "warm"
    cold = _cli(
        "analyze", synthetic, "--json", "--lakehouse", str(cold_root), **{MODE_VARIABLE: "off"}
    )
    assert cold.returncode == 0, cold.stderr
    done = _cli("server", "start", "--lakehouse", str(warm_root), "--idle-timeout", "600", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    pid = json.loads(done.stdout)["pid"]
    try:
        job = subprocess.Popen(
            [str(EXE), "analyze", synthetic, "--json", "--lakehouse", str(warm_root)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        )  # fmt: skip
        busy = _busy_status(warm_root, job)
        assert busy["busy"].startswith(f"analyze {synthetic} --json --lakehouse {warm_root}")
        # meanwhile a question is refused by the server and answered cold, as without it
        meanwhile = _cli("sql", "select 42 as n", "--lakehouse", str(warm_root))
        assert (meanwhile.returncode, meanwhile.stdout.split()) == (0, ["n", "--", "42"])
        out, err = job.communicate(timeout=600)
        assert job.returncode == 0, err
        status = _status(warm_root)
        assert (status["questions"], "busy" in status) == (1, False)  # the server ran the job
        result = json.loads(out)
        assert timeless(result) == timeless(json.loads(cold.stdout))
        assert result["ingest"]["records"] > 0 and result["anomalies"]

        found = "select run_id, kind, seq_from, seq_to from gold.anomalies order by 1, 2, 3"
        answered = _cli("sql", found, "--lakehouse", str(warm_root))
        capsys.readouterr()
        assert main(["sql", found, "--lakehouse", str(cold_root)]) == 0  # in-process: cold
        assert answered.stdout == capsys.readouterr().out
        assert len(answered.stdout.splitlines()) == 2 + len(result["anomalies"])

        again = _cli("analyze", synthetic, "--json", "--lakehouse", str(warm_root))
        assert again.returncode == 0, again.stderr
        rerun = json.loads(again.stdout)
        assert rerun.pop("ingest") == dict.fromkeys(result.pop("ingest"), 0)  # nothing new
        assert timeless(rerun) == timeless(result)
        assert _status(warm_root)["questions"] == 3
    finally:
        _cli("server", "stop", "--lakehouse", str(warm_root))
        if not _gone(pid):
            os.kill(pid, 9)


# long tier; in the default run: test_stop_ends_the_server_and_a_question_then_answers_cold
@pytest.mark.long
def test_an_idle_server_stops_itself(tmp_path):
    root = tmp_path / "lh"
    done = _cli("server", "start", "--lakehouse", str(root), "--idle-timeout", "2", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    pid = json.loads(done.stdout)["pid"]
    try:
        deadline = time.monotonic() + 60
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _gone(pid)
        assert "idle for 2 s: stopping" in (root / "_server.log").read_text()
        assert not socket_path(root).exists()
        assert _status(root)["running"] is False
    finally:
        if not _gone(pid):
            os.kill(pid, 9)
