"""Bad environments: a read-only lakehouse, a full disk, a damaged `_delta_log`, a missing jar
cache, a table of another schema. Each ends in exit 2 with a message naming the thing and
what to do; nothing is half-written (a rerun once fixed equals a clean run).

The commands run through the CLI's entry point in this process (its Spark session is the
suite's), so each costs no JVM start. The full and read-only disks are small tmpfs mounts
made by the test (root only; otherwise they skip saying so) and unmounted after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from literal_runs import RunSpec, write_run
from reliability_lakehouse import Reference, differing_tables, digest, is_long

from jobs.cli import main
from pulsar_audit.delta_io import Lakehouse

CAN_MOUNT = os.geteuid() == 0


@pytest.fixture
def cli(reference: Reference, monkeypatch, capsys):
    """`pulsar-audit ARGS…` in this process: (exit code, stderr)."""
    monkeypatch.setenv("PULSAR_AUDIT_CONF_DIR", str(reference.conf_dir))

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(list(args))
        return code, capsys.readouterr().err

    return run


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[callable]:
    """Mount a tmpfs of a given size (remountable); unmounted after the test."""
    if not CAN_MOUNT:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def mount(size: str, name: str = "disk") -> Path:
        point = tmp_path / name
        point.mkdir()
        options = f"size={size}"
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], check=True)
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _remount(point: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(point)], check=True)


def _versions(lakehouse_dir: Path) -> dict[str, list[str]]:
    return {
        str(log.parent.relative_to(lakehouse_dir)): sorted(p.name for p in log.iterdir())
        for log in lakehouse_dir.rglob("_delta_log")
    }


# An analyze and its rerun on a tmpfs (210 s of the default suite): in the long suites.
@pytest.mark.reliability_long
@pytest.mark.skipif(
    not is_long(), reason="long bad-environment case: PULSAR_AUDIT_RELIABILITY=long"
)
def test_a_full_disk_exits_2_and_a_rerun_with_space_equals_a_clean_run(
    spark, reference: Reference, cli, tmpfs
):
    disk = tmpfs("160k")
    lakehouse_dir = disk / "lakehouse"
    code, err = cli("analyze", str(reference.inputs), "--lakehouse", str(lakehouse_dir))
    assert code == 2, err[-3000:]
    assert "file system is full" in err and str(lakehouse_dir) in err, err[-3000:]
    _remount(disk, "size=64m")
    code, err = cli("analyze", str(reference.inputs), "--lakehouse", str(lakehouse_dir))
    assert code == 0, err[-3000:]
    lakehouse = Lakehouse(spark, reference.config(lakehouse_dir))
    assert differing_tables(reference.digest, digest(lakehouse)) == {}


def test_a_read_only_lakehouse_exits_2_and_is_left_as_it_was(reference: Reference, cli, tmpfs):
    disk = tmpfs("64m")
    lakehouse_dir = disk / "lakehouse"
    code, err = cli("init", "--lakehouse", str(lakehouse_dir))
    assert code == 0, err[-3000:]
    before = _versions(lakehouse_dir)
    _remount(disk, "ro")
    code, err = cli("analyze", str(reference.inputs), "--lakehouse", str(lakehouse_dir))
    assert code == 2, err[-3000:]
    assert "read-only" in err and str(lakehouse_dir) in err, err[-3000:]
    assert _versions(lakehouse_dir) == before


def test_a_damaged_delta_log_is_named_and_nothing_is_written(
    reference: Reference, cli, tmp_path: Path
):
    lakehouse_dir = tmp_path / "lakehouse"
    shutil.copytree(reference.root / "reference", lakehouse_dir)  # a lakehouse after a run
    manifest_log = lakehouse_dir / "bronze" / "ingested_files" / "_delta_log"
    newest = max(manifest_log.glob("*.json"))
    newest.write_text('{"commitInfo": {"timestamp": 1, "operation": "WRITE"\n{{{ not json\n')
    for crc in manifest_log.glob("*.crc"):
        crc.unlink()
    before = _versions(lakehouse_dir)
    more = tmp_path / "more"
    write_run(more, RunSpec("run-more", messages=20))
    code, err = cli("analyze", str(more), "--lakehouse", str(lakehouse_dir))
    assert code == 2, err[-3000:]
    assert "bronze/ingested_files" in err and "_delta_log" in err and "damaged" in err, err
    assert _versions(lakehouse_dir) == before


def test_a_missing_jar_cache_says_to_run_setup(cli, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PULSAR_AUDIT_CACHE", str(tmp_path / "no-cache"))
    code, err = cli("init", "--lakehouse", str(tmp_path / "lakehouse"))
    assert code == 2
    assert "Delta jars not found" in err and "scripts/setup.sh" in err, err
    assert not (tmp_path / "lakehouse").exists()


def test_a_table_of_another_schema_is_refused_before_any_write(
    spark, reference: Reference, cli, tmp_path: Path
):
    lakehouse_dir = tmp_path / "lakehouse"
    foreign = lakehouse_dir / "bronze" / "ingested_files"
    spark.createDataFrame([(1, "a")], "id long, name string").write.format("delta").save(
        str(foreign)
    )
    code, err = cli("analyze", str(reference.inputs), "--lakehouse", str(lakehouse_dir))
    assert code == 2, err[-3000:]
    assert f"{foreign} is not a pulsar-audit ingested_files table" in err, err[-3000:]
    assert "'content_hash'" in err
    commits = {
        table: [name for name in names if name.endswith(".json")]
        for table, names in _versions(lakehouse_dir).items()
        if table != "bronze/ingested_files"
    }
    # the other tables were created empty (version 0) and never written
    assert commits and all(v == ["00000000000000000000.json"] for v in commits.values())
