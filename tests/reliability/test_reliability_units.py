"""The small pieces the suites rely on, on their own (no Spark): the commit retry's bound,
what an environment error says, the kill point hook."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import pytest
from delta.exceptions import ConcurrentAppendException, MetadataChangedException

from pulsar_audit import commit_retry, environment, faults
from pulsar_audit.errors import ConcurrentJobError


def test_a_conflicting_commit_is_retried_then_succeeds(monkeypatch):
    monkeypatch.setattr(commit_retry.time, "sleep", lambda _: None)
    attempts = []

    def commit() -> int:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConcurrentAppendException("files were added by a concurrent update")
        return 7

    assert commit_retry.retry_commit("bronze.x", "append", commit) == 7
    assert len(attempts) == 3


def test_a_commit_that_always_conflicts_gives_up_saying_what_to_do(monkeypatch):
    pauses: list[float] = []
    monkeypatch.setattr(commit_retry.time, "sleep", pauses.append)

    def commit() -> None:
        raise MetadataChangedException("the metadata was changed by a concurrent update")

    with pytest.raises(ConcurrentJobError) as raised:
        commit_retry.retry_commit("gold.anomalies (/lh/gold/anomalies)", "overwrite", commit)
    message = str(raised.value)
    assert "gold.anomalies (/lh/gold/anomalies): the overwrite conflicted" in message
    assert "6 times in a row (MetadataChangedException)" in message
    assert "run the command again" in message
    assert len(pauses) == commit_retry.COMMIT_ATTEMPTS - 1
    assert max(pauses) <= commit_retry.RETRY_MAX_S * 1.5


def test_other_errors_are_not_retried():
    calls = []

    def commit() -> None:
        calls.append(1)
        raise ValueError("not a conflict")

    with pytest.raises(ValueError):
        commit_retry.retry_commit("t", "append", commit)
    assert calls == [1]


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "file system is full"),
        (OSError(errno.EROFS, "Read-only file system"), "file system is read-only"),
        (RuntimeError("java.io.IOException: No space left on device"), "file system is full"),
        (
            RuntimeError(
                "Failed to read file:/lh/bronze/ingested_files/_delta_log/00000000000000000002.json"
                "\ncom.fasterxml.jackson.core.JsonParseException: Unexpected character ('{')"
            ),
            "the Delta table /lh/bronze/ingested_files: its log (_delta_log) is damaged",
        ),
    ],
)
def test_environment_errors_name_the_thing_and_the_fix(error: Exception, says: str):
    message = environment.describe(error, "/lh")
    assert message is not None and says in message
    assert "run the command again" in message or "ingest its inputs again" in message


def test_other_errors_are_not_environment_errors():
    assert environment.describe(ValueError("seq must be an integer"), "/lh") is None
    assert environment.describe(RuntimeError("/lh/gold/_delta_log is fine"), "/lh") is None


def test_a_kill_point_kills_the_nth_time_and_logs_every_point(tmp_path):
    script = (
        "from pulsar_audit import faults\n"
        "for i in range(3):\n"
        "    faults.point('commit:a')\n"
        "    faults.point('stage:b')\n"
        "print('survived')\n"
    )
    log = tmp_path / "points.log"
    env = {**os.environ, faults.KILL_AT_VAR: "commit:a:2", faults.KILL_LOG_VAR: str(log)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL
    assert "survived" not in done.stdout
    assert log.read_text().splitlines() == ["commit:a:1", "stage:b:1", "commit:a:2"]
    env[faults.KILL_AT_VAR] = "commit:a:4"  # never reached: the process lives
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "survived")


def test_a_delta_log_without_a_commit_is_cleared_and_a_table_is_kept(tmp_path):
    from pulsar_audit.delta_log import clear_uncommitted_log

    interrupted = tmp_path / "interrupted" / "_delta_log"
    (interrupted / "_staged_commits").mkdir(parents=True)
    (interrupted / ".00000000000000000000.json.0f1e.tmp").write_bytes(b"")
    table = tmp_path / "table" / "_delta_log"
    table.mkdir(parents=True)
    (table / "00000000000000000000.json").write_text("{}\n")
    (table / ".00000000000000000001.json.a1b2.tmp").write_bytes(b"")
    clear_uncommitted_log(interrupted.parent)
    clear_uncommitted_log(table.parent)
    assert not interrupted.exists() and interrupted.parent.exists()
    assert sorted(p.name for p in table.iterdir()) == [
        ".00000000000000000001.json.a1b2.tmp",
        "00000000000000000000.json",
    ]
