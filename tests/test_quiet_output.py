"""Without -v a command prints what it was asked for: not the JVM's start-up warning, not
MLflow's INFO lines, not PySpark's Java stack of a failed query (issue 28 item 3). The real
CLI, in its own process (the JVM's lines go to the process's stderr)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pulsar_audit.quiet import jvm_start_quiet

JVM_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"
TYPO = "select last_tz from gold.anomalies"


def _cli(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "jobs.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_a_sql_typo_is_one_line_with_the_hint_and_nothing_else(tmp_path: Path):
    done = _cli("sql", TYPO, "--lakehouse", str(tmp_path / "lh"))
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()  # no JVM warning, no stack, no plan
    assert line.startswith("pulsar-audit sql: the query cannot run: [UNRESOLVED_COLUMN")
    assert "`last_tz` cannot be resolved. Did you mean one of the following? [`last_ts`" in line


def test_verbose_shows_the_jvm_start(tmp_path: Path):
    done = _cli("sql", "select 1 as one", "--lakehouse", str(tmp_path / "lh"), "-v")
    assert done.returncode == 0
    assert JVM_WARNING in done.stderr.splitlines()
    assert done.stdout.split() == ["one", "---", "1"]


def test_mlflow_says_nothing_unless_asked(tmp_path: Path):
    args = ["risk", "what-if", "--config", "3-2-2", "--bookies", "3"]
    done = _cli(*args, "--lakehouse", str(tmp_path / "lh"))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()  # MLflow creating its store said nothing
    assert line.startswith("pulsar-audit risk: no model registered as ")


def test_a_started_process_keeps_its_other_lines(capfd):
    noisy = "import sys; sys.stderr.write('WARNING: Using incubator modules: x\\nreal error\\n')"
    with jvm_start_quiet():
        child = subprocess.Popen([sys.executable, "-c", noisy])
    child.wait(timeout=60)
    err = ""
    for _ in range(100):  # the lines are passed on by a thread, as they come
        err += capfd.readouterr().err
        if "real error" in err:
            break
        time.sleep(0.05)
    assert err.splitlines() == ["real error"]


def test_verbose_passes_every_line(capfd, caplog):
    caplog.set_level("INFO")  # what -v sets
    warning = "import sys; sys.stderr.write('WARNING: Using incubator modules: x\\n')"
    with jvm_start_quiet():
        child = subprocess.Popen([sys.executable, "-c", warning])
    child.wait(timeout=60)
    assert "Using incubator modules" in capfd.readouterr().err
