#!/usr/bin/env bash
# Idempotent setup for a fresh clone: .venv with the package and dev extras, and the JVM
# jars resolved by Maven into the git-ignored .cache/jars. A second run skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
want=$(stamp_of pyproject.toml)
if [ "$(cat .venv/.pulsar-audit-installed 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pulsar-audit[dev,bench] into .venv"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[dev,bench]"
  echo "$want" > .venv/.pulsar-audit-installed
fi

jars="$root/.cache/jars"
want=$(stamp_of jvm/pom.xml)
if [ "$(cat "$jars/.resolved" 2>/dev/null)" != "$want" ]; then
  echo "setup: resolving JVM jars with Maven into .cache/jars"
  rm -rf "$jars" && mkdir -p "$jars"
  mvn --batch-mode --quiet -f jvm/pom.xml \
    -Dmaven.repo.local="$root/.cache/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$jars"
  echo "$want" > "$jars/.resolved"
fi

pulsar_lib="$root/.cache/pulsar/lib"
want=$(stamp_of jvm/pulsar/pom.xml)
if [ "$(cat "$pulsar_lib/.resolved" 2>/dev/null)" != "$want" ]; then
  echo "setup: resolving Apache Pulsar server jars with Maven into .cache/pulsar/lib"
  rm -rf "$pulsar_lib" && mkdir -p "$pulsar_lib"
  mvn --batch-mode --quiet -f jvm/pulsar/pom.xml \
    -Dmaven.repo.local="$root/.cache/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -Dmdep.prependGroupId=true \
    -DoutputDirectory="$pulsar_lib"
  echo "$want" > "$pulsar_lib/.resolved"
fi

# The local Spark driver's class-data archive (pulsar_audit/jvm_archive.py): once per JDK and
# set of jars, from an analyze of examples/ (about a minute); a bare session then starts in
# 3.7 s instead of 6.1 s (docs/performance.md). Without it drivers start as before, only slower: never a setup failure.
if ! .venv/bin/python -c "import sys; from pulsar_audit.jvm_archive import archive_path as a
p = a(); sys.exit(0 if p is None or p.is_file() else 1)"; then
  echo "setup: building the Spark driver's class-data archive into .cache/jvm"
  .venv/bin/python -m jobs.jvm_archive || echo "setup: no class-data archive; Spark drivers start without it"
fi

# Headless Chromium (Debian's package) renders the HTML report in tests; install it when
# missing and we may (root with apt-get), otherwise the report's browser tests say why they skip.
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing chromium with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# The chaos scenarios that cut network links run each Pulsar process in its own network
# namespace and drop packets with iptables (Debian's iproute2 and iptables): install them when
# missing and we may, otherwise those tests skip, saying why.
if { ! command -v iptables >/dev/null || ! command -v ip >/dev/null; } \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing iproute2 and iptables with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 iptables >/dev/null
fi
