"""The Databricks Asset Bundle, checked offline: it parses, its resources are valid for the
`databricks-bundles` types, and every task's entry point accepts exactly its parameters
(`--help`, then the parameters themselves in `--dry-run`, which starts no Spark).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from databricks.bundles.jobs import Job
from databricks.bundles.schemas import Schema
from databricks.bundles.volumes import Volume
from json_schema_check import validate

from jobs.cli import main
from pulsar_audit.config import load_config

REPO = Path(__file__).resolve().parents[2]
# The top-level keys of a bundle configuration (databricks.yml), as Databricks documents them.
BUNDLE_KEYS = {
    "artifacts", "bundle", "experimental", "include", "permissions", "presets", "python",
    "resources", "run_as", "scripts", "sync", "targets", "variables", "workspace",
}  # fmt: skip
TARGET_KEYS = {
    "artifacts", "bundle", "cluster_id", "default", "git", "mode", "permissions", "presets",
    "resources", "run_as", "sync", "variables", "workspace",
}  # fmt: skip
SAMPLE_VALUES = {
    "job.parameters.trace_path": "dbfs:/Volumes/main/pa_landing/landing/traces",
    "job.parameters.runs": "run-a,run-b",
}
REFERENCE = re.compile(r"\$\{(?P<var>[^}]+)\}|\{\{(?P<dyn>[^}]+)\}\}")


def _bundle() -> tuple[dict, dict]:
    """(databricks.yml, its resources merged from every included file)."""
    root = yaml.safe_load((REPO / "databricks.yml").read_text())
    resources: dict[str, dict] = {}
    for pattern in root["include"]:
        files = sorted(REPO.glob(pattern))
        assert files, f"include {pattern!r} matches no file"
        for file in files:
            for kind, items in yaml.safe_load(file.read_text())["resources"].items():
                clash = set(items) & set(resources.get(kind, {}))
                assert not clash, f"{file.name}: {kind} {clash} defined twice"
                resources.setdefault(kind, {}).update(items)
    return root, resources


def _tasks() -> list[tuple[str, dict]]:
    _, resources = _bundle()
    return [
        (f"{job_key}.{task['task_key']}", task)
        for job_key, job in sorted(resources["jobs"].items())
        for task in job["tasks"]
    ]


def _resolve(value: str, variables: dict[str, str]) -> str:
    """Substitute ${var.x}, ${resources…}, ${workspace…} and {{job.parameters.x}} references."""

    def one(match: re.Match) -> str:
        if match["dyn"]:
            return SAMPLE_VALUES[match["dyn"].strip()]
        name = match["var"]
        if name.startswith("var."):
            return _resolve(str(variables[name[4:]]), variables)
        return {"workspace.current_user.short_name": "someone"}[name]

    return REFERENCE.sub(one, value)


def _parameters(task: dict) -> list[str]:
    root, _ = _bundle()
    variables = {k: v["default"] for k, v in root["variables"].items()}
    variables.update(root["targets"]["dev"].get("variables", {}))
    return [_resolve(str(p), variables) for p in task["python_wheel_task"]["parameters"]]


def test_bundle_has_only_documented_keys_and_two_targets():
    root, _ = _bundle()
    assert set(root) <= BUNDLE_KEYS, set(root) - BUNDLE_KEYS
    assert root["bundle"]["name"] == "pulsar-audit"
    assert set(root["targets"]) == {"dev", "prod"}
    for name, target in root["targets"].items():
        assert set(target) <= TARGET_KEYS, (name, set(target) - TARGET_KEYS)
    assert root["targets"]["dev"]["mode"] == "development"
    assert root["targets"]["dev"]["variables"]["schedule_pause_status"] == "PAUSED"
    assert "current_user" in root["targets"]["dev"]["variables"]["schema_prefix"]
    assert root["targets"]["prod"]["mode"] == "production"
    artifact = root["artifacts"]["pulsar_audit_wheel"]
    assert artifact["type"] == "whl" and artifact["path"] == "."
    for variable in root["variables"].values():
        assert "default" in variable and variable.get("description")


def test_resources_validate_against_the_databricks_bundles_types():
    _, resources = _bundle()
    assert set(resources) == {"jobs", "schemas", "volumes"}
    jobs = {key: Job.from_dict(job) for key, job in resources["jobs"].items()}
    schemas = [Schema.from_dict(s) for s in resources["schemas"].values()]
    volumes = [Volume.from_dict(v) for v in resources["volumes"].values()]
    assert len(schemas) == 1 and {v.name for v in volumes} == {"landing", "checkpoints"}
    assert {job.name for job in jobs.values()} == {
        "pulsar-audit-scheduled",
        "pulsar-audit-backfill",
        "pulsar-audit-watch",
    }
    # a field the types do not know is refused, so the check above can fail
    with pytest.raises(ValueError, match="Unexpected field"):
        Job.from_dict({**resources["jobs"]["pulsar_audit_scheduled"], "shedule": {}})


def test_scheduled_job_runs_the_stages_in_order_with_retries_and_notifications():
    _, resources = _bundle()
    job = resources["jobs"]["pulsar_audit_scheduled"]
    assert job["schedule"]["pause_status"] == "${var.schedule_pause_status}"
    assert job["email_notifications"]["on_failure"] and job["webhook_notifications"]["on_failure"]
    tasks = {t["task_key"]: t for t in job["tasks"]}
    needs = {key: {d["task_key"] for d in t.get("depends_on", [])} for key, t in tasks.items()}
    ingests = {k for k in tasks if k.startswith("ingest_")}
    assert ingests == {
        "ingest_traces",
        "ingest_broker_logs",
        "ingest_bookie_logs",
        "ingest_client_logs",
        "ingest_zk",
    }
    assert all(needs[k] == {"init"} for k in ingests)
    assert needs["pipeline"] == ingests and needs["risk_scoring"] == {"pipeline"}
    assert needs["alerts"] == {"risk_scoring"}  # alerts read gold.config_risk
    for key, task in tasks.items():
        assert task["timeout_seconds"] > 0 and task["max_retries"] >= 1, key
        assert task["libraries"] == [{"whl": "./dist/*.whl"}], key


def test_watch_job_is_continuous_paused_by_default_on_the_whole_landing_volume(capsys):
    root, resources = _bundle()
    job = resources["jobs"]["pulsar_audit_watch"]
    assert job["continuous"] == {"pause_status": "${var.watch_pause_status}"}
    assert "schedule" not in job and job["max_concurrent_runs"] == 1
    assert root["variables"]["watch_pause_status"]["default"] == "PAUSED"
    assert root["targets"]["dev"]["variables"]["watch_pause_status"] == "PAUSED"
    assert job["email_notifications"]["on_failure"] and job["webhook_notifications"]["on_failure"]
    # a continuous job takes no retry policy nor dependencies (Databricks restarts it itself)
    (task,) = job["tasks"]
    assert not {"max_retries", "depends_on", "timeout_seconds"} & set(task)
    parameters = _parameters(task)
    landing = "dbfs:/Volumes/main/pulsar_audit_someone_landing"
    # traces/, logs/<source>/ and zk/ alike: causes are attached from the logs live
    assert parameters[:2] == ["watch", f"{landing}/landing"]
    checkpoint = parameters[parameters.index("--checkpoint") + 1]
    assert checkpoint == f"{landing}/checkpoints/watch"  # the checkpoints volume, durable
    assert parameters[parameters.index("--env") + 1] == "databricks"
    # the databricks env lists the volume through Auto Loader
    assert main([*parameters, "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["arguments"]["checkpoint"] == checkpoint
    assert plan["arguments"]["path"] == f"{landing}/landing"
    assert load_config("databricks").watch.source == "auto_loader"


def test_every_task_calls_the_packages_own_entry_point():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    normalized = re.sub(r"[-_.]+", "_", project["name"])
    for key, task in _tasks():
        wheel_task = task["python_wheel_task"]
        assert re.sub(r"[-_.]+", "_", wheel_task["package_name"]) == normalized, key
        assert wheel_task["entry_point"] in project["scripts"], key
        assert project["scripts"][wheel_task["entry_point"]] == "jobs.cli:main"


def _command(parameters: list[str]) -> list[str]:
    """The subcommand words of a task's parameters (before its first argument or option)."""
    words = []
    for word in parameters:
        if word.startswith("-") or "/" in word:
            break
        words.append(word)
    return words


@pytest.mark.parametrize("key,task", _tasks(), ids=[key for key, _ in _tasks()])
def test_task_entry_point_has_help_and_runs_its_parameters_dry(key, task, capsys, monkeypatch):
    parameters = _parameters(task)
    with pytest.raises(SystemExit) as exited:
        main([*_command(parameters), "--help"])
    assert exited.value.code == 0
    assert "--dry-run" in capsys.readouterr().out
    # a landing path on a Volume (dbfs:/Volumes/…) is checked when Spark lists it, not before
    assert main([*parameters, "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    validate(plan, "dry_run")
    assert plan["dry_run"] is True and plan["command"] == " ".join(_command(parameters))
    assert plan["env"] == "databricks" and plan["storage"] == "catalog"
    assert plan["layers"] == {
        layer: f"main.pulsar_audit_someone_{layer}" for layer in ("bronze", "silver", "gold")
    }
    if "--runs" in parameters:
        assert plan["arguments"]["runs"] == "run-a,run-b"


def test_a_parameter_the_entry_point_does_not_know_is_refused(capsys):
    key, task = next((k, t) for k, t in _tasks() if k.endswith(".pipeline"))
    with pytest.raises(SystemExit) as exited:
        main([*_parameters(task), "--dry-run", "--no-such-option"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_dry_run_refuses_a_missing_local_input_and_a_catalog_override_on_paths(capsys, tmp_path):
    assert main(["ingest", "traces", str(tmp_path / "nowhere"), "--dry-run"]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["init", "--catalog", "main", "--dry-run"]) == 2
    assert "need storage 'catalog'" in capsys.readouterr().err
