"""jobs/watch_beside.py with a stand-in child (a small Python script in the role of
`pulsar-audit watch`; the real one: tests/live/test_capture_watch.py): its micro-batch lines
are printed as they come, SIGTERM makes it leave with its result, a child that does not leave
in time is killed with its whole process group, and a failed capture takes it down."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from json_schema_check import SCHEMA

from jobs.watch_beside import WatchBeside, watch_text

VIEW = {"micro_batch": 0, "files": 3, "runs": [], "findings": [], "alerts": []}
# Says it watches, prints a micro-batch line, then on SIGTERM leaves with a result (or, with
# argv[1] == "stubborn", ignores SIGTERM and starts a grandchild that would outlive it).
CHILD = f"""
import json, signal, subprocess, sys, time
stubborn = sys.argv[1] == "stubborn"
left = []
signal.signal(signal.SIGTERM, signal.SIG_IGN if stubborn else lambda *_: left.append(1))
if stubborn:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("spark says hello", file=sys.stderr, flush=True)
print(json.dumps({VIEW!r}), file=sys.stderr, flush=True)
while not left:
    time.sleep(0.05)
print(json.dumps({{"batches": 1, "files": 3, "runs": ["r1"], "provisional": []}}))
"""


class _StandIn(WatchBeside):
    def __init__(self, tmp_path: Path, said: list[str], how: str = "leaves"):
        super().__init__(tmp_path / "landing", tmp_path / "home", said.append)
        self.how = how

    def command(self) -> list[str]:
        return [sys.executable, "-c", CHILD, self.how]


def _wait_for(condition, timeout_s: float = 30) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _group_alive(group: int) -> list[int]:
    """The live (not zombie) processes of process group `group`."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)"
        except OSError:  # it ended meanwhile
            continue
        if fields[2] == str(group) and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def test_micro_batches_are_printed_as_they_come_and_sigterm_makes_it_leave(tmp_path) -> None:
    said: list[str] = []
    with _StandIn(tmp_path, said) as beside:
        _wait_for(lambda: len(beside.views) == 1)  # before the run is over
        assert said[-1] == "watch | micro-batch 0: 3 file(s)"
        watched = beside.finish()

    assert watched["exit_code"] == 0
    assert (watched["micro_batches_during_run"], watched["micro_batches"]) == (1, 1)
    assert watched["result"]["runs"] == ["r1"]
    jsonschema.validate(watched, SCHEMA["$defs"]["capture_run"]["properties"]["watch"])
    assert (tmp_path / "home" / "watch.log").read_text() == "spark says hello\n"
    assert watch_text(watched).startswith(
        "watch: 1 micro-batch(es), 1 during the run; provisional findings: none; exit 0"
    )


def test_a_child_that_does_not_leave_is_killed_with_its_group(tmp_path) -> None:
    said: list[str] = []
    with _StandIn(tmp_path, said, "stubborn") as beside:
        _wait_for(lambda: len(beside.views) == 1)
        group = beside.proc.pid
        code = beside._stop(timeout_s=1)

    assert code is None and said[-1] == "watch did not leave within 1 s: killed"
    _wait_for(lambda: _group_alive(group) == [], 10)  # the grandchild went with the group


def test_a_failed_capture_takes_the_watch_down(tmp_path) -> None:
    said: list[str] = []
    with pytest.raises(RuntimeError, match="capture failed"), _StandIn(tmp_path, said) as beside:
        _wait_for(lambda: len(beside.views) == 1)
        raise RuntimeError("capture failed")
    assert beside.proc.returncode == 0  # it left cleanly on SIGTERM
    assert json.loads("".join(beside._stdout))["batches"] == 1
