"""`pulsar-audit ingest traces` started cold: the session a small local input gets.

Run in a new interpreter (the test process already runs a Spark session, which a command
would share instead of starting its own); the ingest itself is replaced by a recorder, and
the lakehouse by one whose session's settings are a dict: what is checked is the config the
command's Spark would start from and the settings around the ingest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pulsar_audit.spark import GENERATED_CODE_CONF, SMALL_INPUT_CONF

ROOT = Path(__file__).resolve().parents[2]

_COLD_INGEST = """
import argparse, json, sys, types
import jobs.ingest
from jobs.commands.ingest import cmd_ingest_traces
from jobs.context import Context

class Conf(dict):
    def set(self, key, value):
        self[key] = value
    def unset(self, key):
        self.pop(key, None)

seen = {}
def recorder(lakehouse, path, progress):
    seen.update(lakehouse.spark.conf)
    return types.SimpleNamespace(as_dict=lambda: {})

jobs.ingest.ingest_traces = recorder
args = argparse.Namespace(
    path=sys.argv[1], env="local", lakehouse=sys.argv[2], json=True, verbose=False
)
ctx = Context(args)
ctx.__dict__["lakehouse"] = types.SimpleNamespace(spark=types.SimpleNamespace(conf=Conf()))
cmd_ingest_traces(ctx)
spark = ctx.config.spark
print(json.dumps([spark.shuffle_partitions, spark.conf, seen, ctx.lakehouse.spark.conf]))
"""


def test_a_small_local_trace_gets_the_small_input_session_as_in_analyze(tmp_path):
    trace = tmp_path / "run.jsonl"
    trace.write_text("x" * (7 << 20))  # above the size from which the ingest compiles its code
    out = subprocess.run(
        [sys.executable, "-c", _COLD_INGEST, str(trace), str(tmp_path / "lakehouse")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    partitions, conf, during, after = json.loads(out.stdout.splitlines()[-1])
    assert partitions == 1
    assert SMALL_INPUT_CONF.items() <= conf.items()
    assert during == GENERATED_CODE_CONF  # the ingest's own settings, around it only
    assert after == {}
