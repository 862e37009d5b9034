"""Which calls the warm server takes, decided without Spark: `analyze` goes to a running
server unless it sends alerts (the sinks' secrets are the caller's); the server refuses a job
once the package's code differs from what it imported (the client then runs it cold)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs import context, server, warm
from pulsar_audit.config import load_config


@pytest.mark.parametrize(
    ("argv", "job", "question"),
    [
        (["analyze", "runs/"], True, False),
        (["analyze", "runs/", "--json", "-v"], True, False),
        (["analyze", "--help"], False, False),
        (["analyze", "runs/", "--dry-run"], False, False),
        (["summary"], False, True),
        (["ingest", "traces", "runs/"], False, False),
    ],
)
def test_jobs_and_questions_are_told_apart(argv, job, question):
    assert (warm.is_job(argv), warm.is_question(argv)) == (job, question)


def test_an_analyze_that_sends_alerts_runs_cold_and_a_question_still_goes(tmp_path, monkeypatch):
    config = load_config("local", lakehouse=str(tmp_path / "lh"))
    with_sinks = replace(config, alerts=replace(config.alerts, sinks=[{"name": "hook"}]))
    socket_file = tmp_path / "sock"
    socket_file.touch()  # a server seems to run
    asked: list[list[str]] = []
    monkeypatch.delenv(warm.MODE_VARIABLE, raising=False)
    monkeypatch.setattr(warm, "question_config", lambda argv: with_sinks)
    monkeypatch.setattr(warm, "socket_path", lambda root: socket_file)
    monkeypatch.setattr(warm, "_ask", lambda path, request: asked.append(request["argv"]) or 0)
    assert warm.answer_from_server(["analyze", "runs/"]) is None
    assert asked == []
    assert warm.answer_from_server(["summary"]) == 0
    monkeypatch.setattr(warm, "question_config", lambda argv: config)  # no sinks
    assert warm.answer_from_server(["analyze", "runs/"]) == 0
    assert asked == [["summary"], ["analyze", "runs/"]]


def test_the_server_refuses_a_job_once_the_code_differs(tmp_path, monkeypatch):
    args = context.common_options().parse_args(["--lakehouse", str(tmp_path / "lh")])
    args.idle_timeout = 60.0
    running = server.Server(args, [])
    job = {"argv": ["analyze", "runs/"], "cwd": str(tmp_path), "identity": running.identity}
    question = {**job, "argv": ["summary"]}
    assert (running._refusal(job), running._refusal(question)) == (None, None)
    monkeypatch.setattr(server, "code_fingerprint", lambda: "the files as they are now")
    assert running._refusal(job).startswith("the code changed since the server started")
    assert running._refusal(question) is None
    assert running._refusal({**job, "identity": "another config"}) == (
        "the question's config is not the server's"
    )
