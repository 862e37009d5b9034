"""The Spark driver's class-data archive: which options a driver gets, and that an archive the
JVM cannot use is never an error nor a line on stdout (a real `java`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pulsar_audit import jvm_archive
from pulsar_audit.jvm_archive import ARCHIVE_ENV, DUMP_ENV, QUIET, archive_path, driver_options


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PULSAR_AUDIT_CACHE", str(tmp_path))
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    monkeypatch.delenv(DUMP_ENV, raising=False)
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "delta-spark_2.13-4.0.0.jar").write_bytes(b"x" * 10)
    return tmp_path


def test_no_archive_no_options(cache: Path) -> None:
    path = archive_path()
    assert path is not None and path.parent == cache / "jvm" and not path.exists()
    assert driver_options() == ""


def test_an_archive_that_exists_is_used_unless_turned_off(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = archive_path()
    path.parent.mkdir()
    path.write_bytes(b"")
    assert driver_options() == f"-XX:SharedArchiveFile={path} {QUIET}"
    monkeypatch.setenv(ARCHIVE_ENV, "off")
    assert driver_options() == ""


def test_a_build_writes_where_it_is_told(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DUMP_ENV, "/somewhere/new.jsa")
    assert driver_options() == f"-XX:ArchiveClassesAtExit=/somewhere/new.jsa {QUIET}"


def test_other_jars_other_archive(cache: Path) -> None:
    before = archive_path()
    (cache / "jars" / "delta-spark_2.13-4.0.0.jar").write_bytes(b"x" * 11)
    assert archive_path() != before


HELLO = 'class Hello { public static void main(String[] a) { System.out.println("hello"); } }'


@pytest.fixture(scope="module")
def stale_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a class-data archive written for one jar, another jar of the same class): the archive
    no longer fits, as after a changed jar, and the JVM says so."""
    java = jvm_archive.java_binary()
    assert java is not None
    work = tmp_path_factory.mktemp("cds")
    (work / "Hello.java").write_text(HELLO)
    tools = java.parent
    subprocess.run([str(tools / "javac"), "-d", str(work), str(work / "Hello.java")], check=True)
    for name in ("old.jar", "new.jar"):
        jar = [str(tools / "jar"), "cf", str(work / name), "-C", str(work), "Hello.class"]
        subprocess.run(jar, check=True)
    archive = work / "hello.jsa"
    dump = [str(java), f"-XX:ArchiveClassesAtExit={archive}", "-cp", str(work / "old.jar")]
    subprocess.run([*dump, "Hello"], check=True, capture_output=True, timeout=120)
    assert archive.is_file()
    return archive, work / "new.jar"


@pytest.mark.parametrize("quiet", [True, False])
def test_an_archive_that_no_longer_fits_is_no_error(
    stale_archive: tuple[Path, Path], quiet: bool
) -> None:
    archive, jar = stale_archive
    options = [f"-XX:SharedArchiveFile={archive}", *(QUIET.split() if quiet else [])]
    command = [str(jvm_archive.java_binary()), *options, "-cp", str(jar), "Hello"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if quiet:  # the JVM's complaint goes to stderr; stdout holds only the program's output
        assert done.stdout == "hello\n"
        assert "unable to use shared archive" in done.stderr.lower()
    else:  # what QUIET prevents: the JVM's warning in the program's stdout
        assert "unable to use shared archive" in done.stdout.lower()
        assert done.stdout.endswith("hello\n")
