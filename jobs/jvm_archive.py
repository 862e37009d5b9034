"""Build the local Spark driver's class-data archive (pulsar_audit/jvm_archive.py) from a real
analyze of the committed examples, so that it holds the classes a job loads: Spark's, Delta's
(create, append, replace, merge), Parquet's, Hadoop's.

    .venv/bin/python -m jobs.jvm_archive [--force]

scripts/setup.sh runs it when the archive for this JDK and these jars is missing. The analyze
runs in a child process whose driver writes the archive when its JVM exits; the file is moved
into place only when whole, and archives of other JDKs or jars are removed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pulsar_audit.errors import SetupError
from pulsar_audit.jvm_archive import ARCHIVE_ENV, DUMP_ENV, archive_path
from pulsar_audit.paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"
WORKLOAD_TIMEOUT_S = 1800


def build(force: bool = False, examples: Path = EXAMPLES) -> Path:
    """The archive for this JDK and these jars, built unless it exists (or `force`)."""
    target = archive_path()
    if target is None:
        raise SetupError("no `java` found ($JAVA_HOME/bin/java or on PATH): no archive to build")
    if target.is_file() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix="pulsar-audit-jvm-archive-") as scratch:
        command = [sys.executable, "-m", "jobs.jvm_archive", "--workload", str(examples), scratch]
        env = {**os.environ, DUMP_ENV: str(partial), ARCHIVE_ENV: "off"}
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=WORKLOAD_TIMEOUT_S
        )
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise SetupError(
            f"building the JVM class archive {target} failed: `{' '.join(command)}` exited "
            f"{done.returncode}{'' if partial.is_file() else ' and wrote no archive'}:\n{tail}"
        )
    os.replace(partial, target)
    for stale in target.parent.glob("spark-driver-*"):
        if stale != target and not stale.name.endswith(".partial"):
            stale.unlink(missing_ok=True)
    return target


def workload(examples: Path, scratch: Path) -> int:
    """Analyze `examples` into a lakehouse under `scratch`, then stop Spark and let its JVM
    exit on its own (the archive is written at a normal exit, never when killed)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from jobs.cli import main

    args = ["analyze", str(examples), "--env", "local", "--lakehouse", str(scratch / "lakehouse")]
    code = main([*args, "--json"])
    gateway = SparkContext._gateway
    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if session is not None:
        session.stop()
    if gateway is not None and getattr(gateway, "proc", None) is not None:
        gateway.proc.stdin.close()  # the driver exits on its stdin's end, writing the archive
        gateway.proc.wait(timeout=WORKLOAD_TIMEOUT_S)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
    parser.add_argument("--workload", nargs=2, metavar=("EXAMPLES", "SCRATCH"), help="internal")
    args = parser.parse_args(argv)
    if args.workload:
        return workload(Path(args.workload[0]), Path(args.workload[1]))
    try:
        print(f"JVM class archive: {build(force=args.force)}")
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
