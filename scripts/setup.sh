#!/usr/bin/env bash
# Idempotent setup for a fresh clone: .venv with the package and dev extras, and the JVM
# jars resolved by Maven into the git-ignored .cache/jars. A second run skips what is done.
#
# What waits on the network or on apt-get (the Pulsar server's jars, Chromium, iptables) runs
# in the background beside the CPU-bound steps (pip, the driver's class-data archive); each
# background step's output is kept in .cache/setup/STEP.log and shown if it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
logs="$root/.cache/setup"
mkdir -p "$logs"

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

# background STEP FUNCTION: run FUNCTION in the background, its output in $logs/STEP.log
declare -A started=()
background() {
  "$2" >"$logs/$1.log" 2>&1 &
  started[$1]=$!
}
# finish STEP: wait for a background step; if it failed, show its output and fail setup
finish() {
  local pid=${started[$1]:-}
  [ -n "$pid" ] || return 0
  if ! wait "$pid"; then
    echo "setup: $1 failed; its output ($logs/$1.log):" >&2
    cat "$logs/$1.log" >&2
    exit 1
  fi
  unset "started[$1]"
}

# maven_resolve POM OUT [ARGS...]: the runtime dependencies of POM copied into OUT, once per POM
maven_resolve() {
  local pom=$1 out=$2 want
  shift 2
  want=$(stamp_of "$pom")
  [ "$(cat "$out/.resolved" 2>/dev/null)" != "$want" ] || return 0
  rm -rf "$out" && mkdir -p "$out"
  mvn --batch-mode --quiet -f "$pom" -Dmaven.repo.local="$root/.cache/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out" "$@"
  echo "$want" > "$out/.resolved"
}
delta_jars() { maven_resolve jvm/pom.xml "$root/.cache/jars"; }
pulsar_jars() {
  maven_resolve jvm/pulsar/pom.xml "$root/.cache/pulsar/lib" -Dmdep.prependGroupId=true
}
needs_resolving() { [ "$(cat "$2/.resolved" 2>/dev/null)" != "$(stamp_of "$1")" ]; }

# Headless Chromium (Debian's package) renders the HTML report in tests; the chaos scenarios
# that cut network links run each Pulsar process in its own network namespace and drop packets
# with iptables (Debian's iproute2 and iptables). Installed when missing and we may (root with
# apt-get); otherwise those tests skip, saying why.
missing_packages() {
  command -v chromium >/dev/null || echo chromium
  command -v ip >/dev/null || echo iproute2
  command -v iptables >/dev/null || echo iptables
}
system_packages() {
  apt-get update -qq
  # shellcheck disable=SC2046
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(missing_packages) >/dev/null
}
if [ -n "$(missing_packages)" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing $(missing_packages | xargs) with apt-get (in the background)"
  background apt system_packages
fi

# Maven runs one at a time (both share .cache/m2): Delta's jars first, which the archive
# below needs, then the Pulsar server's, which only the capture tests need.
if needs_resolving jvm/pom.xml "$root/.cache/jars"; then
  echo "setup: resolving JVM jars with Maven into .cache/jars (in the background)"
  background delta-jars delta_jars
fi

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

finish delta-jars

if needs_resolving jvm/pulsar/pom.xml "$root/.cache/pulsar/lib"; then
  echo "setup: resolving Apache Pulsar server jars with Maven into .cache/pulsar/lib (in the background)"
  background pulsar-jars pulsar_jars
fi

# pulsar-audit's Spark session extension (jvm/src; pulsar_audit/spark_extension.py), compiled
# against the installed pyspark's jars, once per source and pyspark. Without a JDK compiler
# (or when it fails) local sessions run without it, only with more stages: never a setup
# failure, and not tried again until the source or pyspark changes (or .cache/spark-ext goes).
spark_extension() {
  local out=$root/.cache/spark-ext/pulsar-audit-spark.jar src spark_jars want classes
  src=$(find jvm/src -name '*.java' 2>/dev/null | sort || true)
  spark_jars=$(.venv/bin/python -c "import os, pyspark
print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))" 2>/dev/null || true)
  if [ -z "$src" ] || [ ! -d "$spark_jars" ]; then
    echo "setup: no Spark extension (no jvm/src or no pyspark jars); sessions run without it"
    return 0
  fi
  # shellcheck disable=SC2086 # the source files, one word each (no spaces in jvm/src)
  want=$( (cat $src; ls "$spark_jars") | sha256sum | cut -c1-16)
  case "$(cat "$out.stamp" 2>/dev/null)" in "$want" | "none:$want") return 0 ;; esac
  echo "setup: compiling the Spark extension (jvm/src) into .cache/spark-ext"
  mkdir -p "$(dirname "$out")"
  rm -f "$out"
  classes=$(mktemp -d)
  # shellcheck disable=SC2086
  if command -v javac >/dev/null && command -v jar >/dev/null \
    && javac --release 17 -nowarn -cp "$spark_jars/*" -d "$classes" $src \
    && jar cf "$out" -C "$classes" .; then
    echo "$want" > "$out.stamp"
  else
    rm -f "$out"
    echo "none:$want" > "$out.stamp"
    echo "setup: no Spark extension (no JDK compiler, or it failed); sessions run without it"
  fi
  rm -rf "$classes"
}
spark_extension

# The local Spark driver's class-data archive (pulsar_audit/jvm_archive.py): once per JDK and
# set of jars, from an analyze of examples/ (about a minute); a bare session then starts in
# 3.7 s instead of 6.1 s (docs/performance.md). Without it drivers start as before, only slower: never a setup failure.
if ! .venv/bin/python -c "import sys; from pulsar_audit.jvm_archive import archive_path as a
p = a(); sys.exit(0 if p is None or p.is_file() else 1)"; then
  echo "setup: building the Spark driver's class-data archive into .cache/jvm"
  .venv/bin/python -m jobs.jvm_archive || echo "setup: no class-data archive; Spark drivers start without it"
fi

finish pulsar-jars
finish apt
