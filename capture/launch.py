"""Java command lines and config files for the Pulsar JVMs, from the jars in .cache/pulsar/lib.

There is no Pulsar tarball on Maven Central, so instead of upstream's bin/pulsar we build the
`java` command ourselves: classpath = every jar of `pulsar_lib_dir()`, the JVM options Pulsar
needs on Java 17, a capped heap, and our own log4j2 config writing one file per process.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from string import Template

from pulsar_audit.errors import SetupError
from pulsar_audit.paths import REPO_ROOT, pulsar_lib_dir

TEMPLATES = REPO_ROOT / "conf" / "pulsar"

MAIN_CLASS = {
    "standalone": "org.apache.pulsar.PulsarStandaloneStarter",
    "broker": "org.apache.pulsar.PulsarBrokerStarter",
    "bookie": "org.apache.bookkeeper.server.Main",
    "zookeeper": "org.apache.zookeeper.server.quorum.QuorumPeerMain",
    "init-metadata": "org.apache.pulsar.PulsarClusterMetadataSetup",
    # BookKeeper's auditor and replication worker, as `bin/pulsar autorecovery` runs them
    "autorecovery": "org.apache.bookkeeper.replication.AutoRecoveryMain",
    # `bin/bookkeeper shell`: an operator's tool (bookieformat after a disk is replaced)
    "bookie-shell": "org.apache.bookkeeper.bookie.BookieShell",
}

# Heap and direct memory per role: 2 cores / 24 GB shared with Spark test runs.
MEMORY = {
    "standalone": ["-Xms256m", "-Xmx768m", "-XX:MaxDirectMemorySize=512m"],
    "broker": ["-Xms128m", "-Xmx384m", "-XX:MaxDirectMemorySize=256m"],
    "bookie": ["-Xms64m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m"],
    "zookeeper": ["-Xms64m", "-Xmx192m"],
    "init-metadata": ["-Xmx192m"],
    "autorecovery": ["-Xms64m", "-Xmx192m", "-XX:MaxDirectMemorySize=128m"],
    "bookie-shell": ["-Xmx128m"],
}

_JVM_OPTS = [
    "-XX:+UseG1GC",
    "-XX:+PerfDisableSharedMem",
    "-Djava.net.preferIPv4Stack=true",
    "-Djute.maxbuffer=10485760",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlog4j.shutdownHookEnabled=false",
    "-Dlog4j2.is.webapp=false",
    "-Dzookeeper.admin.enableServer=false",
    "-Dzookeeper.4lw.commands.whitelist=*",
    "-Dzookeeper.snapshot.trust.empty=true",
    "-Dbookkeeper.metadata.bookie.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    *[
        f"--add-opens={module}=ALL-UNNAMED"
        for module in (
            "java.base/java.io",
            "java.base/java.util.zip",
            "java.base/java.nio",
            "java.base/jdk.internal.misc",
            "java.base/sun.net",
            "java.management/sun.management",
        )
    ],
]


def java_binary() -> str:
    """$JAVA_HOME/bin/java, else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home, "bin", "java") if home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise SetupError("no java found: set JAVA_HOME or put Java 17 on PATH")
    return str(candidate)


def check_jars() -> Path:
    """The Pulsar jar directory, or a SetupError saying how to get it."""
    lib = pulsar_lib_dir()
    if not lib.is_dir() or not any(lib.glob("*.jar")):
        raise SetupError(f"no Pulsar jars in {lib}: run `make setup` (scripts/setup.sh)")
    return lib


def java_command(role: str, log_file: Path, args: list[str]) -> list[str]:
    """The full `java ...` argv that runs `role`'s main class with `args`, logging to `log_file`."""
    lib = check_jars()
    return [
        java_binary(),
        "-cp",
        f"{lib}/*",
        *MEMORY[role],
        *_JVM_OPTS,
        f"-Dlog4j2.configurationFile={TEMPLATES / 'log4j2.properties'}",
        f"-Dpulsar.log.file={log_file}",
        MAIN_CLASS[role],
        *args,
    ]


def render(template: str, dest: Path, **values: object) -> Path:
    """Write conf/pulsar/`template` to `dest` with its ${placeholders} filled from `values`."""
    text = Template((TEMPLATES / template).read_text()).substitute(
        {key: str(value) for key, value in values.items()}
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest
