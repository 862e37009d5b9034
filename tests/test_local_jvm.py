"""The JVM a local session starts with: the throughput collector and C2 for hot code only for
a larger input, C1 and the serial collector for a small one (pulsar_audit/spark.py).

Each case starts the product's own session in a new interpreter (the test process runs the
tests' session, whose JVM options are the tests' own) and asks its JVM what it runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_ASK_THE_JVM = """
import json, sys
from pulsar_audit.config import load_config
from pulsar_audit.spark import for_input, get_spark
config = for_input(load_config("local", sys.argv[1]), int(sys.argv[2]))
jvm = get_spark(config).sparkContext._jvm
factory = jvm.java.lang.management.ManagementFactory
collectors = sorted(bean.getName() for bean in factory.getGarbageCollectorMXBeans())
hotspot = factory.getPlatformMXBean(jvm.java.lang.Class.forName(
    "com.sun.management.HotSpotDiagnosticMXBean"))
options = {name: hotspot.getVMOption(name).getValue() for name in (
    "TieredStopAtLevel", "Tier4InvocationThreshold", "Tier4BackEdgeThreshold")}
print(json.dumps([collectors, options]))
"""


def _jvm_of(tmp_path: Path, input_bytes: int) -> tuple[list[str], dict[str, str]]:
    out = subprocess.run(
        [sys.executable, "-c", _ASK_THE_JVM, str(tmp_path / "lakehouse"), str(input_bytes)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    collectors, options = json.loads(out.stdout.splitlines()[-1])
    return collectors, options


@pytest.mark.parametrize(
    ("input_bytes", "collectors", "options"),
    [
        (
            1 << 30,
            ["PS MarkSweep", "PS Scavenge"],
            {
                "TieredStopAtLevel": "4",
                "Tier4InvocationThreshold": "50000",
                "Tier4BackEdgeThreshold": "400000",
            },
        ),
        (1000, ["Copy", "MarkSweepCompact"], {"TieredStopAtLevel": "1"}),
    ],
    ids=["large input", "small input"],
)
def test_a_local_sessions_jvm_fits_its_input(tmp_path, input_bytes, collectors, options):
    seen_collectors, seen_options = _jvm_of(tmp_path, input_bytes)
    assert seen_collectors == collectors
    assert options.items() <= seen_options.items()
