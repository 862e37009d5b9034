"""The main job on a real multi-process Spark cluster: a standalone master and two workers
started from the venv's pyspark (`spark-class`, loopback, memory capped), `analyze --env
standalone` on the synthetic example plus two generated runs, and gold identical to a local run.

What the executors need reaches them as on a real cluster: the Delta jars through
`spark.jars` (served by the driver), the package as a zip added with `addPyFile`. The
executors' Python is started with `-S` (no site-packages), so the editable install of this
checkout cannot leak into them: a probe imports `pulsar_audit` on both executors and must
find it inside the shipped zip.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from literal_runs import RunSpec, write_run
from spark_test_conf import TEST_SPARK_CONF

from jobs.analyze import analyze
from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.output import print_json

REPO = Path(__file__).resolve().parents[2]
WORKERS = 2
GOLD = ("run_summary", "anomalies", "outages")
SILVER = ("message_history", "delivery")
DRIVER = """
import json, sys, time
from jobs.cli import main
from pulsar_audit.config import load_config
from pulsar_audit.spark import get_spark

lakehouse, folder, probe_file, extra_conf = sys.argv[1:5]
spark = get_spark(load_config("standalone", lakehouse=lakehouse), json.loads(extra_conf))
sc = spark.sparkContext
deadline = time.monotonic() + 120
while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
    time.sleep(0.5)

def where(_):
    import os, time
    import pulsar_audit.schemas
    time.sleep(0.5)
    return pulsar_audit.schemas.__file__, os.getcwd()

found = sc.parallelize(range(4), 4).map(where).collect()
executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1
with open(probe_file, "w") as out:
    json.dump({"executors": executors, "found": found, "master": sc.master}, out)
sys.exit(main(["analyze", folder, "--env", "standalone", "--lakehouse", lakehouse, "--json"]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A standalone master and two 1-core, 1 GiB workers on loopback; stopped afterwards."""
    base = tmp_path_factory.mktemp("standalone")
    spark_class = Path(sys.executable).parent / "spark-class"
    port, ui_port = _free_port(), _free_port()
    master = f"spark://127.0.0.1:{port}"
    env = {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),  # the venv's pyspark distribution
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(base / "logs"),
    }
    commands = [
        [
            str(spark_class),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
        ]  # fmt: skip
    ]
    for i in range(WORKERS):
        (base / f"worker-{i}").mkdir()
        commands.append(
            [
                str(spark_class),
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(base / f"worker-{i}"),
                master,
            ]  # fmt: skip
        )
    processes = []
    try:
        for i, command in enumerate(commands):
            log = (base / f"process-{i}.log").open("w")
            processes.append(
                subprocess.Popen(
                    command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
            if i == 0:
                time.sleep(2)  # the workers register with a master that listens
        deadline = time.monotonic() + 120
        while _alive_workers(ui_port) < WORKERS:
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                logs = "\n".join(p.read_text()[-2000:] for p in sorted(base.glob("process-*.log")))
                pytest.fail(f"the standalone cluster did not come up:\n{logs}")
            time.sleep(1)
        yield {"master": master, "base": base, "ui_port": ui_port}
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic example run and two generated runs (traces only: the real unload run's
    logs would add minutes of log parsing to both analyses for a default-run test)."""
    folder = tmp_path_factory.mktemp("inputs") / "captures"
    shutil.copytree(REPO / "examples" / "synthetic", folder / "synthetic")
    write_run(folder / "generated", RunSpec("run-clean", messages=120, readers=("r1", "r2")))
    write_run(
        folder / "generated",
        RunSpec("run-faults", messages=150, lost={40, 41}, duplicated={7}, nacked={90}),
    )
    return folder


def _executor_python(base: Path) -> Path:
    """The executors' Python: this interpreter without site-packages (no editable install)."""
    wrapper = base / "executor-python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _same(left, right) -> bool:
    """Order-free equality of two frames, computed in Spark."""
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


@pytest.mark.deploy  # two analyses and five JVMs: about 700 CPU s (`pytest -m deploy`)
def test_analyze_on_two_workers_gives_the_same_gold_as_a_local_run(
    cluster: dict, inputs: Path, spark, tmp_path: Path
):
    lakehouse_dir = tmp_path / "on-cluster"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": str(_executor_python(cluster["base"])),
        "PULSAR_AUDIT_SPARK_MASTER": cluster["master"],
        "PYTHONPATH": "",
    }
    probe = tmp_path / "probe.json"
    # the tests' planner settings (tiny data), not their local master or driver memory
    tuning = {k: v for k, v in TEST_SPARK_CONF.items() if k != "spark.driver.memory"}
    arguments = [str(lakehouse_dir), str(inputs), str(probe), json.dumps(tuning)]
    command = [sys.executable, "-c", DRIVER, *arguments]
    done = subprocess.run(
        command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1500
    )
    assert done.returncode == 0, done.stderr[-4000:]
    on_cluster = json.loads(done.stdout)

    seen = json.loads(probe.read_text())
    assert seen["master"] == cluster["master"] and seen["executors"] == WORKERS
    worker_dirs = {str(cluster["base"] / f"worker-{i}") for i in range(WORKERS)}
    used = set()
    for module_file, cwd in seen["found"]:
        assert "pulsar_audit_pkg.zip" in module_file, module_file  # shipped, not installed
        used |= {d for d in worker_dirs if cwd.startswith(d)}
    assert used == worker_dirs  # both workers ran Python tasks

    local = Lakehouse(spark, load_config("local", lakehouse=str(tmp_path / "local")))
    out = io.StringIO()
    print_json(analyze(local, local.config, str(inputs)), out)  # as the CLI prints it
    locally = json.loads(out.getvalue())
    assert on_cluster["runs"] == locally["runs"]
    assert {r["run_id"] for r in locally["runs"]} >= {"run-clean", "run-faults"}
    assert on_cluster["ingest"] == locally["ingest"] and on_cluster["infra"] == locally["infra"]
    cluster_tables = Lakehouse(spark, load_config("local", lakehouse=str(lakehouse_dir)))
    for table in (*GOLD, *SILVER):
        mine, theirs = cluster_tables.read(table), local.read(table)
        assert theirs.count() > 0 or table == "outages", table
        assert _same(mine, theirs), f"{table} differs between the cluster and the local run"
