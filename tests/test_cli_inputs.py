"""Wrong input is refused before Spark starts: a clear message, exit 2, no JVM launched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

JVM_STARTED = "jdk.incubator.vector"  # the JVM's first words on stderr (shown with -v)


def _cli(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "jobs.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args",
    [
        ("analyze", "/nonexistent/traces"),
        ("ingest", "traces", "/nonexistent/traces"),
        ("ingest", "logs", "/nonexistent/logs", "--source", "broker"),
        ("ingest", "zk", "/nonexistent/zk"),
    ],
)
def test_missing_path_is_a_usage_error_before_spark(args, tmp_path: Path):
    done = _cli(*args, "--lakehouse", str(tmp_path / "lh"), "-v")
    assert done.returncode == 2
    assert "/nonexistent/" in done.stderr and "no such file or directory" in done.stderr
    assert JVM_STARTED not in done.stderr
    assert not (tmp_path / "lh").exists()


def test_analyze_of_a_folder_without_inputs_says_so(tmp_path: Path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "notes.txt").write_text("not a trace\n")
    done = _cli("analyze", str(tmp_path / "empty"), "--lakehouse", str(tmp_path / "lh"), "-v")
    assert done.returncode == 2
    assert "no trace files" in done.stderr and "no ZooKeeper captures" in done.stderr
    assert JVM_STARTED not in done.stderr
