"""`pulsar-audit watch` through the real command line, as issue 29 asks of a restart: the first
watch process is killed with SIGKILL mid-watch, once its alerts are recorded as sent; chunk 3
lands; a second process on the same checkpoint takes only it, reconciles the run, and the real
HTTP receiver gets no alert twice. Opt-in (`-m live_long`): many minutes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from json_schema_check import validate
from live_trace import write_chunk
from watch_results import AFTER_CHUNK_3, assert_each_finding_alerted_once, findings

from pulsar_audit.config import load_config
from pulsar_audit.delta_io import Lakehouse

REPO = Path(__file__).resolve().parents[2]
PROVISIONAL_KINDS = ("suspected_loss", "outage_in_progress")
WAIT_S = 1800


def _conf_with_webhook(folder: Path, url: str) -> Path:
    raw = yaml.safe_load((REPO / "conf" / "local.yaml").read_text())
    hook = {"url": url, "max_attempts": 2, "backoff_initial_ms": 20}
    raw["alerts"]["sinks"] = [{"name": "hook", "webhook": hook}]
    folder.mkdir()
    (folder / "local.yaml").write_text(yaml.safe_dump(raw))
    return folder


def _sent_provisional(lakehouse: Lakehouse) -> int:
    """Provisional alerts the first watch has recorded as sent (0 before its tables exist)."""
    try:
        alerts = lakehouse.read("alerts").filter(f"kind IN {PROVISIONAL_KINDS}")
        return alerts.filter("exists(deliveries, d -> d.state = 'sent')").count()
    except Exception:  # noqa: BLE001 - the other process has not created gold.alerts yet
        return 0


@pytest.mark.live_long
def test_watch_killed_with_sigkill_and_restarted_alerts_each_finding_once(
    spark, tmp_path: Path, httpserver
) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    conf = _conf_with_webhook(tmp_path / "conf", httpserver.url_for("/hook"))
    env = {**os.environ, "PULSAR_AUDIT_CONF_DIR": str(conf), "PULSAR_AUDIT_ENV": "local"}
    lakehouse_dir, landing = tmp_path / "lakehouse", tmp_path / "landing"
    checkpoint = tmp_path / "checkpoint"
    watch = [sys.executable, "-m", "jobs.cli", "watch", str(landing), "--max-files", "1"]
    watch += ["--lakehouse", str(lakehouse_dir), "--checkpoint", str(checkpoint)]
    write_chunk(landing, 1)
    write_chunk(landing, 2)
    reader = Lakehouse(spark, load_config("local", lakehouse=str(lakehouse_dir)))

    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen(
            [*watch, "--trigger-s", "1"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the kill takes its JVM too
        )
    try:
        deadline = time.monotonic() + WAIT_S
        # killed once batch 1 (chunk 2) is committed to the checkpoint and its alerts sent
        while not (checkpoint / "commits" / "1").exists() or _sent_provisional(reader) < 3:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the first watch sent no provisional alerts"
            time.sleep(5)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()

    write_chunk(landing, 3)
    second = subprocess.run(
        [*watch, "--once", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    result = json.loads(second.stdout)
    validate(result, "watch")
    assert (result["batches"], result["files"]) == (1, 1)
    assert findings(result) == AFTER_CHUNK_3
    assert_each_finding_alerted_once(httpserver, result)
