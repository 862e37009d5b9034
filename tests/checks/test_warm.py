"""The checks' GX warm-up: imported off the main thread, and the context built there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_commands_that_warm_up_gx_do_not_import_it_themselves():
    # analyze and ingest start the warm-up thread before Spark; importing GX where they are
    # imported would cost its seconds on the main thread again, before the JVM starts
    code = (
        "import sys, jobs.analyze, jobs.commands.ingest, checks.warm; "
        "print(sorted(m for m in sys.modules if m.startswith('great_expectations'))[:3])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_warm_up_thread_builds_the_checks_context():
    code = (
        "from checks.warm import warm_up_in_background; "
        "t = warm_up_in_background(); t.join(120); "
        "from checks import gx; print(t.name, t.is_alive(), gx._context.cache_info().currsize)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "gx-warm-up False 1"
