"""The local Spark driver's class-data archive (JDK AppCDS): where it is and the JVM options
that use it.

A local Spark driver loads, parses and verifies some 20 thousand classes at every start
(Spark, Delta, Hadoop, Parquet) before its first job; on the 2-core machine the archive below
takes a bare session from 6.1 to 3.7 s. A dynamic class-data archive, written once by a JVM
that ran a real analyze (`python -m jobs.jvm_archive`, run by scripts/setup.sh), holds those
classes parsed and verified, mapped read-only and shared by every driver that starts after it
(docs/performance.md, "Sessions 12–14"). An archive fits one JDK and one set of jars: its file
name holds a key of both, so a changed JDK, pyspark or Delta jar names a file that does not
exist yet (setup builds it; until then drivers start as before). A JVM that finds an archive
it cannot use (`-Xshare:auto`, the default) starts without it: never an error.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from pulsar_audit.paths import cache_dir, jars_dir

# "off": start drivers without the archive (to measure, or to rule it out).
ARCHIVE_ENV = "PULSAR_AUDIT_JVM_ARCHIVE"
# Set by `jobs.jvm_archive` for the driver that writes a new archive at its exit.
DUMP_ENV = "PULSAR_AUDIT_JVM_ARCHIVE_DUMP"
# The JVM's own warnings (an archive it cannot use, for one) go to stderr, never into stdout,
# where a command's --json output goes.
QUIET = "-Xlog:disable -Xlog:all=warning:stderr"


def java_binary() -> Path | None:
    """The `java` spark-submit starts: $JAVA_HOME/bin/java, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.is_file():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found else None


def archive_key() -> str | None:
    """A key of what an archive is only valid for: the JDK, pyspark, the Delta jars."""
    java = java_binary()
    if java is None:
        return None
    import pyspark

    jdk = java.parent.parent
    release = jdk / "release"
    parts = [
        str(java),
        release.read_text(errors="replace") if release.is_file() else str(java.stat().st_mtime),
        pyspark.__version__,
        str(Path(pyspark.__file__).resolve().parent),
        *sorted(f"{j.name}:{j.stat().st_size}" for j in jars_dir().glob("*.jar")),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_dir() -> Path:
    return cache_dir() / "jvm"


def archive_path() -> Path | None:
    key = archive_key()
    return archive_dir() / f"spark-driver-{key}.jsa" if key else None


def driver_options() -> str:
    """The local driver's JVM options for the archive: write one (while `jobs.jvm_archive`
    builds it), use the one that fits, or nothing (none built, or turned off)."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {QUIET}"
    if os.environ.get(ARCHIVE_ENV, "").lower() == "off":
        return ""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path and path.is_file() else ""
