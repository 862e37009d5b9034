"""The wheel the bundle deploys: it builds from pyproject.toml, carries the packages, the
`pulsar-audit` entry point and the env configs, and its entry point runs from a clean venv.

The default test installs the wheel alone (`--no-deps`) into a fresh venv and lends it this
venv's third-party packages through PYTHONPATH (where the editable install of the checkout is
not visible: `.pth` files are only read from site directories); the test marked `deploy`
installs it with its dependencies, as a cluster would (minutes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "capture",
    "checks",
    "ingest",
    "jobs",
    "models",
    "pipelines",
    "pulsar_audit",
    "serve",
    "simulate",
)
DATABRICKS = ["--env", "databricks", "--catalog", "main", "--schema-prefix", "pa", "--json"]
LANDING = "dbfs:/Volumes/main/pa_landing/landing"
DRY_RUNS = [
    (["init"], [*DATABRICKS]),
    (["ingest", "traces"], [f"{LANDING}/traces", *DATABRICKS]),
    (["ingest", "logs"], [f"{LANDING}/logs/bookie", "--source", "bookie", *DATABRICKS]),
    (["pipeline"], ["--runs", "run-a,run-b", *DATABRICKS]),
    (["alerts", "send"], [*DATABRICKS]),
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(out), str(REPO)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (built,) = out.glob("pulsar_audit-*.whl")
    return built


def _venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    return where / "bin"


def _cli(bin_dir: Path, args: list[str], cwd: Path, env: dict[str, str]) -> str:
    command = [str(bin_dir / "pulsar-audit"), *args]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (args, done.stderr[-3000:])
    return done.stdout


def _dry_runs(bin_dir: Path, cwd: Path, env: dict[str, str]) -> None:
    """Every bundle command's --help, then a dry run with its parameters (conf from the wheel)."""
    assert "analyze" in _cli(bin_dir, ["--help"], cwd, env)
    for command, args in DRY_RUNS:
        assert "--dry-run" in _cli(bin_dir, [*command, "--help"], cwd, env)
        plan = json.loads(_cli(bin_dir, [*command, *args, "--dry-run"], cwd, env))
        assert plan["dry_run"] is True and plan["command"] == " ".join(command)
        assert plan["storage"] == "catalog" and plan["layers"]["gold"] == "main.pa_gold"


def test_wheel_holds_the_packages_the_entry_point_and_the_configs(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    assert "pulsar-audit = jobs.cli:main" in scripts
    assert {n.split("/")[0] for n in names if n.endswith(".py")} == set(PACKAGES)
    for conf in ("local", "databricks", "standalone"):
        assert f"pulsar_audit/conf/{conf}.yaml" in names, conf
    assert "pulsar_audit/log4j2.properties" in names
    assert not any(n.startswith("tests/") for n in names)


def test_entry_point_runs_from_a_clean_venv(wheel: Path, tmp_path: Path):
    bin_dir = _venv(tmp_path / "venv")
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PULSAR_AUDIT_CONF_DIR", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # dependencies only, not the checkout
    probe = "import jobs.cli, pulsar_audit; print(pulsar_audit.__file__)"
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", probe],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert where.startswith(str(tmp_path / "venv")), where
    _dry_runs(bin_dir, tmp_path, env)


@pytest.mark.deploy
def test_wheel_installs_with_its_dependencies_into_a_fresh_venv(wheel: Path, tmp_path: Path):
    bin_dir = _venv(tmp_path / "venv")
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True, timeout=1800,
    )  # fmt: skip
    unset = ("PYTHONPATH", "PULSAR_AUDIT_CONF_DIR", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    _dry_runs(bin_dir, tmp_path, env)
