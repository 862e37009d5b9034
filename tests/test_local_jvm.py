"""The JVM a local session starts with: the throughput collector and C2 for hot code only for
a larger input, C1 and the serial collector for a small one, and a collector chosen
elsewhere left alone (pulsar_audit/spark.py LOCAL_JVM_OPTIONS, local_jvm_conf).

Each case starts the product's own session in a new interpreter (the test process runs the
tests' session, whose JVM options are the tests' own) and asks its JVM what it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pulsar_audit.spark import JVM_OPTION_VARIABLES, LOCAL_JVM_OPTIONS, local_jvm_conf

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
    "TieredStopAtLevel", "Tier4InvocationThreshold", "Tier4CompileThreshold",
    "Tier4BackEdgeThreshold", "InlineSmallCode", "MaxInlineSize")}
print(json.dumps([collectors, options]))
"""
LARGE = 1 << 30  # bytes of input: above the small-input bound
RAISED = {
    "TieredStopAtLevel": "4",
    "Tier4InvocationThreshold": "50000",
    "Tier4CompileThreshold": "60000",
    "Tier4BackEdgeThreshold": "400000",
    "InlineSmallCode": "1000",
    "MaxInlineSize": "20",
}


def _jvm_of(tmp_path: Path, input_bytes: int, **env: str) -> tuple[list[str], dict[str, str]]:
    clean = {k: v for k, v in os.environ.items() if k not in JVM_OPTION_VARIABLES}
    clean = {k: v for k, v in clean.items() if not k.startswith("PULSAR_AUDIT_")}
    out = subprocess.run(
        [sys.executable, "-c", _ASK_THE_JVM, str(tmp_path / "lakehouse"), str(input_bytes)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**clean, **env},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    collectors, options = json.loads(out.stdout.splitlines()[-1])
    return collectors, options


@pytest.mark.parametrize(
    ("input_bytes", "env", "collectors", "options"),
    [
        (LARGE, {}, ["PS MarkSweep", "PS Scavenge"], RAISED),
        (1000, {}, ["Copy", "MarkSweepCompact"], {"TieredStopAtLevel": "1"}),
        # a collector chosen in the environment: the JVM starts with it (HotSpot refuses two)
        (
            LARGE,
            {"JAVA_TOOL_OPTIONS": "-XX:+UseG1GC"},
            ["G1 Old Generation", "G1 Young Generation"],
            RAISED,
        ),
    ],
    ids=["large input", "small input", "collector chosen in the environment"],
)
def test_a_local_sessions_jvm_fits_its_input(tmp_path, input_bytes, env, collectors, options):
    seen_collectors, seen_options = _jvm_of(tmp_path, input_bytes, **env)
    assert seen_collectors == collectors
    assert options.items() <= seen_options.items()


def test_a_collector_in_the_configs_own_options_is_left_alone(monkeypatch):
    for variable in JVM_OPTION_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    assert local_jvm_conf({}) == {"spark.driver.defaultJavaOptions": LOCAL_JVM_OPTIONS}
    own = {"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseZGC"}
    [options] = local_jvm_conf(own).values()
    assert "GC" not in options
    assert "-XX:Tier4InvocationThreshold=50000" in options
