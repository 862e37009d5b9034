"""The checks' GX warm-up: imported off the main thread, and the context built there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Records which thread first looks GX up, then runs `analyze_path` as a cold `analyze` does
# (no Spark yet) with the job itself replaced by a wait for the warm-up thread.
_WHO_IMPORTS_GX = """
import importlib.abc, sys, threading
who = []
class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "great_expectations" and not who:
            who.append(threading.current_thread().name)
        return None
sys.meta_path.insert(0, Spy())
import argparse
import jobs.analyze as job
from jobs.context import Context
ctx = Context(argparse.Namespace(path="examples", env="local", lakehouse=sys.argv[1], json=True))
ctx.__dict__["lakehouse"] = None
def waits_for_the_warm_up(lakehouse, config, path, progress):
    for thread in threading.enumerate():
        if thread.name == "gx-warm-up":
            thread.join(120)
    return {}
job.analyze = waits_for_the_warm_up
job.analyze_path(ctx, "examples")
print(who)
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    """`code` run by a new interpreter in the repo (nothing of GX imported yet)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )


def test_a_cold_analyze_imports_gx_in_the_warm_up_thread(tmp_path):
    # on the main thread, GX's 2 s of import came before the JVM's start instead of beside it
    out = _python(_WHO_IMPORTS_GX, str(tmp_path / "lakehouse"))
    assert out.stdout.strip() == "['gx-warm-up']"


def test_the_warm_up_thread_builds_the_checks_context():
    code = (
        "from checks.warm import warm_up_in_background; "
        "t = warm_up_in_background(); t.join(120); "
        "from checks import gx; "
        "print(t.name, t.is_alive(), gx._built_context.cache_info().currsize)"
    )
    out = _python(code)
    assert out.stdout.strip() == "gx-warm-up False 1"


def test_a_failed_warm_up_is_left_to_the_first_validation():
    # GX cannot be imported: the thread ends quietly, the validation's own import raises
    code = (
        "import sys; sys.modules['great_expectations'] = None\n"
        "from checks.warm import warm_up_in_background\n"
        "t = warm_up_in_background(); t.join(120); print(t.is_alive())\n"
        "try:\n"
        "    from checks.gx import validate\n"
        "except ImportError as e:\n"
        "    print('ImportError', e.name)\n"
    )
    out = _python(code)
    assert out.stdout.split() == ["False", "ImportError", "great_expectations"]
    assert out.stderr == ""
