"""No secret leaked: with every secret set (Pulsar token, OAuth2 client secret, TLS key path,
webhook signing secret, credentials written into sink URLs), `analyze`, `alerts send|list`
and `report` run as a user runs them, and every byte they leave behind is searched: stdout
(the JSON outputs), stderr (the logs, -v), the report, the alert sink's file, every file of
the lakehouse (Delta logs, MLflow's store if any) and every table's rows (read in Spark:
Parquet may compress a value out of sight of a byte search). 0 hits.

The capture variant (marked `pulsar`) also runs `capture` against a real Pulsar standalone
with the token set, and searches its output folder.
"""

from __future__ import annotations

import json
import logging
import os
import secrets as random_secrets
import socket
import subprocess
import sys
from functools import reduce
from pathlib import Path

import pytest
import yaml
from literal_runs import RunSpec, write_run
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from reliability_lakehouse import CONF_LOCAL, record_figure, suite_config

from jobs.cli import main
from pulsar_audit.delta_io import Lakehouse
from pulsar_audit.schemas import TABLES
from pulsar_audit.secrets import (
    OAUTH2_VAR,
    TLS_CERT_VAR,
    TLS_KEY_VAR,
    TOKEN_VAR,
    redact,
    redact_url,
)

HMAC_VAR = "PULSAR_AUDIT_TEST_WEBHOOK_SECRET"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def secret_env(tmp_path: Path) -> dict[str, str]:
    """Every secret a user may set, each a fresh random value that can only come from here."""
    key = tmp_path / "client-key.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\n" + random_secrets.token_hex(32) + "\n")
    oauth2 = {
        "issuer_url": "https://issuer.invalid",
        "client_id": "audit",
        "client_secret": "oauth-" + random_secrets.token_hex(12),
    }
    return {
        TOKEN_VAR: "tok-" + random_secrets.token_hex(16),
        OAUTH2_VAR: json.dumps(oauth2),
        TLS_CERT_VAR: str(tmp_path / "client-cert.pem"),
        TLS_KEY_VAR: str(key),
        HMAC_VAR: "hmac-" + random_secrets.token_hex(16),
        "_oauth2_client_secret": oauth2["client_secret"],
        "_url_password": "pw-" + random_secrets.token_hex(8),
        "_url_token": "qt-" + random_secrets.token_hex(8),
    }


def _conf_dir(tmp_path: Path, hook_url: str, dead_url: str) -> Path:
    from spark_test_conf import CHILD_SPARK_CONF

    conf = yaml.safe_load(CONF_LOCAL.read_text())
    conf["spark"].update(
        {"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "1g"},
        conf=CHILD_SPARK_CONF,
    )
    conf["alerts"]["sinks"] = [
        {"name": "hook", "webhook": {"url": hook_url, "hmac_secret_env": HMAC_VAR}},
        {
            "name": "down",
            "webhook": {"url": dead_url, "max_attempts": 1, "hmac_secret_env": HMAC_VAR},
        },
        {"name": "file", "file": {"path": "{lakehouse}/alerts.jsonl"}},
    ]
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "local.yaml").write_text(yaml.safe_dump(conf))
    return conf_dir


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "pulsar-audit"
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=900, env=env, check=False
    )


def scan(values: list[str], places: list[Path], texts: dict[str, str]) -> list[str]:
    """Where any of `values` appears: files under `places` (bytes) and the given texts."""
    hits = []
    needles = [v.encode() for v in values]
    for place in places:
        files = [place] if place.is_file() else [p for p in place.rglob("*") if p.is_file()]
        for path in files:
            data = path.read_bytes()
            hits += [f"{path}: {n[:6]!r}…" for n in needles if n in data]
    for name, text in texts.items():
        hits += [f"{name}: {v[:6]}…" for v in values if v in text]
    return hits


def _held(text: Column, values: list[str]) -> Column:
    """Those of `values` that `text` contains."""
    return F.filter(F.array(*[F.lit(v) for v in values]), lambda v: text.contains(v))


def table_hits(lakehouse: Lakehouse, values: list[str]) -> dict[str, list[str]]:
    """value → the tables with a row holding it: every table's rows as JSON text, searched
    in one Spark job (one job per table cost a plan, a scan and a job's start each)."""
    rows = []
    for table in TABLES:
        df = lakehouse.read(table)
        held = _held(F.to_json(F.struct(*df.columns)), values)
        # names no table's column has: a select may not name one of its own new columns
        rows.append(df.select(F.lit(table).alias("_table"), F.explode(held).alias("_value")))
    found = reduce(DataFrame.unionByName, rows).distinct().collect()
    return {v: sorted(r["_table"] for r in found if r["_value"] == v) for v in values}


def test_no_secret_in_any_output_log_table_or_report(
    spark, tmp_path: Path, secret_env: dict[str, str], httpserver, monkeypatch, capfd, caplog
):
    password, url_token = secret_env["_url_password"], secret_env["_url_token"]
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    hook = httpserver.url_for("/hook").replace("://", f"://audit:{password}@", 1)
    dead = f"http://audit:{password}@127.0.0.1:{_free_port()}/hook?token={url_token}"
    conf_dir = _conf_dir(tmp_path, f"{hook}?token={url_token}", dead)
    inputs = tmp_path / "inputs"
    write_run(inputs, RunSpec("run-secret", messages=60, lost={7}, outages={20: 1500}))
    lakehouse_dir = tmp_path / "lakehouse"
    secrets_set = {k: v for k, v in secret_env.items() if not k.startswith("_")}
    env = {**os.environ, "PULSAR_AUDIT_CONF_DIR": str(conf_dir), **secrets_set}
    common = ("--lakehouse", str(lakehouse_dir))
    report = tmp_path / "report.html"
    # analyze as a user runs it (its own process, logs on stderr); the rest through the same
    # entry point in this process (no JVM start each), stdout and stderr captured at the fds
    runs = {"analyze": _cli("analyze", str(inputs), *common, "--json", "-v", env=env)}
    monkeypatch.setenv("PULSAR_AUDIT_CONF_DIR", str(conf_dir))
    for key, value in secrets_set.items():
        monkeypatch.setenv(key, value)
    caplog.set_level(logging.INFO)
    for name, args in {
        "alerts send": ("alerts", "send", *common, "--json", "-v"),
        "alerts list": ("alerts", "list", *common, "--json", "-v"),
        "report": ("report", "run-secret", "--out", str(report), *common, "-v"),
    }.items():
        # each run's own log records: the webhook receiver in this process (werkzeug) logged
        # the requests `analyze` made, with their URLs, before any run's filter was installed
        capfd.readouterr()
        caplog.clear()
        code = main(list(args))
        out, err = capfd.readouterr()
        runs[name] = subprocess.CompletedProcess(args, code, out, err + caplog.text)
    for name, done in runs.items():
        assert done.returncode in (0, 1), f"{name}: {done.stderr[-2000:]}"
    alerts = json.loads(runs["alerts list"].stdout)["alerts"]
    assert alerts, "no alert was raised: the scan would prove nothing about the sinks"
    assert httpserver.log, "the webhook received nothing"
    # the down sink's failure is kept, with its URL's credentials masked
    down = [d["error"] for a in alerts for d in a["deliveries"] if d["sink"] == "down"]
    assert down and all("token=***" in (e or "") for e in down), down[:1]

    values = [
        secret_env[TOKEN_VAR],
        secret_env["_oauth2_client_secret"],
        secret_env[TLS_KEY_VAR],
        secret_env[HMAC_VAR],
        password,
        url_token,
    ]
    texts = {f"{n} stdout": d.stdout for n, d in runs.items()}
    texts |= {f"{n} stderr": d.stderr for n, d in runs.items()}
    places = [lakehouse_dir, report]
    hits = scan(values, places, texts)
    lakehouse = Lakehouse(spark, suite_config(conf_dir, lakehouse_dir))
    # the run's id, searched with the secrets, shows the search finds what a table holds
    held = table_hits(lakehouse, [*values, "run-secret"])
    assert {"producer_events", "run_summary", "alerts"} <= set(held.pop("run-secret"))
    hits += [f"table {t}: {v[:6]}…" for v, tables in held.items() for t in tables]
    files = sum(1 for p in lakehouse_dir.rglob("*") if p.is_file()) + 1
    record_figure(
        "secrets",
        {"secrets": len(values), "places": files + len(texts) + len(TABLES), "hits": len(hits)},
    )
    assert hits == []


def test_urls_with_credentials_are_redacted_when_printed():
    assert redact_url("http://admin:s3cret@broker:8080/admin/v2?token=abc&x=1") == (
        "http://admin:***@broker:8080/admin/v2?token=***&x=1"
    )
    assert redact_url("pulsar+ssl://broker:6651") == "pulsar+ssl://broker:6651"
    # an absolute SQLite path keeps its four slashes (MLflow's store is printed in errors)
    assert redact("in sqlite:////tmp/lh/mlflow/mlflow.db: run") == (
        "in sqlite:////tmp/lh/mlflow/mlflow.db: run"
    )
    text = "POST https://u:p4ss@hook.invalid/x failed: url: /x?api_key=K3Y&n=1 (timeout)"
    assert redact(text) == (
        "POST https://u:***@hook.invalid/x failed: url: /x?api_key=***&n=1 (timeout)"
    )


@pytest.mark.pulsar
def test_capture_with_a_token_leaves_no_trace_of_it(
    standalone, tmp_path: Path, secret_env: dict[str, str], monkeypatch
):
    """`capture` authenticates with the token from the environment (the standalone accepts
    any); neither the trace, the copied logs, the ZooKeeper capture nor capture.json hold it."""
    from capture.harness import CaptureOptions, capture

    monkeypatch.setenv(TOKEN_VAR, secret_env[TOKEN_VAR])
    out = tmp_path / "capture"
    opts = CaptureOptions(
        service_url=standalone.service_url,
        admin_url=standalone.admin_url,
        out=out,
        topic="secret",
        messages=200,
    )
    summary = capture(opts, standalone)
    assert summary["acked"] == 200
    assert scan([secret_env[TOKEN_VAR]], [out], {"summary": json.dumps(summary)}) == []
