"""`pulsar-audit ingest traces|logs|zk` started cold: the session a small local input gets.

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

import pytest

from pulsar_audit.spark import GENERATED_CODE_CONF, SMALL_INPUT_CONF

ROOT = Path(__file__).resolve().parents[2]

_COLD_INGEST = """
import argparse, json, sys, types
import ingest.logs, ingest.zk_ingest, jobs.ingest
from jobs.commands import ingest as commands
from jobs.context import Context

class Conf(dict):
    def set(self, key, value):
        self[key] = value
    def unset(self, key):
        self.pop(key, None)

seen = {}
def recorder(lakehouse, path, *rest):
    seen.update(lakehouse.spark.conf)
    return types.SimpleNamespace(as_dict=lambda: {})

jobs.ingest.ingest_traces = ingest.logs.ingest_logs = ingest.zk_ingest.ingest_zk = recorder
import checks.warm
warmed = []
checks.warm.warm_up_in_background = lambda: warmed.append(True)
kind = sys.argv[3]
args = argparse.Namespace(
    path=sys.argv[1], env="local", lakehouse=sys.argv[2], json=True, verbose=False,
    source="broker", host=None, tz="UTC",
)
ctx = Context(args)
ctx.__dict__["lakehouse"] = types.SimpleNamespace(spark=types.SimpleNamespace(conf=Conf()))
getattr(commands, f"cmd_ingest_{kind}")(ctx)
spark = ctx.config.spark
print(json.dumps([spark.shuffle_partitions, spark.conf, seen, ctx.lakehouse.spark.conf, warmed]))
"""


def _cold(kind: str, path: Path, tmp_path: Path) -> list:
    """[shuffle partitions, session conf, settings during the ingest, settings after it,
    whether GX's warm-up was started]."""
    out = subprocess.run(
        [sys.executable, "-c", _COLD_INGEST, str(path), str(tmp_path / "lakehouse"), kind],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_a_small_local_trace_gets_the_small_input_session_as_in_analyze(tmp_path):
    trace = tmp_path / "run.jsonl"
    trace.write_text("x" * (7 << 20))  # above the size from which the ingest compiles its code
    partitions, conf, during, after, warmed = _cold("traces", trace, tmp_path)
    assert partitions == 1
    assert SMALL_INPUT_CONF.items() <= conf.items()
    assert during == GENERATED_CODE_CONF  # the ingest's own settings, around it only
    assert after == {}
    assert warmed == [True]  # GX imported beside the JVM's start


@pytest.mark.parametrize(
    ("kind", "name", "size", "ingest_conf"),
    [
        ("logs", "broker-1.log", 1000, {}),
        ("zk", "zk.jsonl", 1000, {}),
        # a few MB: generated code for the ingest, as analyze gives it (jobs/ingest.py)
        ("logs", "broker-1.log", 7 << 20, GENERATED_CODE_CONF),
    ],
)
def test_logs_or_captures_get_the_session_analyze_gives_their_ingest(
    tmp_path, kind, name, size, ingest_conf
):
    (tmp_path / name).write_text("x" * size)
    partitions, conf, during, after, warmed = _cold(kind, tmp_path / name, tmp_path)
    assert partitions == 1
    assert SMALL_INPUT_CONF.items() <= conf.items()
    assert during == ingest_conf
    assert after == {}
    assert warmed == []  # they validate nothing with GX: no GX import beside the JVM


def test_a_large_log_keeps_the_env_session(tmp_path):
    log = tmp_path / "broker-1.log"
    log.write_text("x" * (33 << 20))  # above the small-input bound
    partitions, conf, _, _, _ = _cold("logs", log, tmp_path)
    assert partitions > 1
    assert not SMALL_INPUT_CONF.keys() & conf.keys()
