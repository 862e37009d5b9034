"""pulsar-audit's own Spark session extension (jvm/src/io/pulsaraudit/spark/, Java, compiled by
scripts/setup.sh into the git-ignored cache): in a session that shuffles into one partition
without adaptive execution (the small-input session, a `watch` micro-batch, the tests), each
shuffle Spark places into that one partition is a narrow coalesce instead, so that a plan of
joins and aggregates runs as one stage, not one stage per exchange (docs/performance.md,
"Session 35"). A session shuffling into more partitions keeps its plans as they are. Its jar
also holds the local file system local sessions use (`LOCAL_FS_CONF`).

Local sessions load it when the jar is there (`get_spark`); without it (no JDK compiler at
setup, or turned off) they run exactly as before, only with more stages.
"""

from __future__ import annotations

import os
from pathlib import Path

from pulsar_audit.paths import cache_dir

EXTENSION_CLASS = "io.pulsaraudit.spark.OnePartitionShuffles"
# The same jar's local file system without a child process per file created or renamed
# (jvm/src/io/pulsaraudit/spark/ShellFreeRawLocalFileSystem.java): Hadoop's, whose `chmod` and
# `readlink` processes cost some 5 ms each, 20 per Delta commit (docs/performance.md, "Session 37")
LOCAL_FS_CONF = {  # Hadoop settings
    "fs.file.impl": "io.pulsaraudit.spark.ShellFreeLocalFileSystem",
    "fs.AbstractFileSystem.file.impl": "io.pulsaraudit.spark.ShellFreeLocalFs",
}
# "off": start sessions without it (to measure, or to rule it out).
EXTENSION_ENV = "PULSAR_AUDIT_SPARK_EXTENSION"


def extension_jar_path() -> Path:
    """Where scripts/setup.sh writes the extension's jar."""
    return cache_dir() / "spark-ext" / "pulsar-audit-spark.jar"


def extension_jar() -> Path | None:
    """The extension's jar when a local session should load it: built, and not turned off."""
    if os.environ.get(EXTENSION_ENV, "").lower() == "off":
        return None
    jar = extension_jar_path()
    return jar if jar.is_file() else None
