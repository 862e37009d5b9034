#!/usr/bin/env bash
# Resolve another Apache Pulsar release's server jars with Maven into .cache/pulsar-VERSION
# (git-ignored), the way scripts/setup.sh resolves the release of jvm/pulsar/pom.xml; then
#   PULSAR_AUDIT_CACHE=$PWD/.cache/pulsar-VERSION pulsar-audit cluster up ...
# runs that release. Only the version changes, and, before 4.0, the log4j binding (slf4j 1.x:
# log4j-slf4j-impl instead of log4j-slf4j2-impl). The Spark jars are linked from .cache/jars so
# that `chaos run` (which analyzes) works under PULSAR_AUDIT_CACHE too.
#   usage: scripts/pulsar_release.sh VERSION      e.g. scripts/pulsar_release.sh 3.0.7
set -euo pipefail
version=${1:?usage: scripts/pulsar_release.sh VERSION}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "not a release version: $version" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache/pulsar-$version"
lib="$cache/pulsar/lib"
if [ -f "$lib/.resolved" ]; then echo "$lib: already resolved"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/no-extra-repository"
binding=log4j-slf4j2-impl
[ "${version%%.*}" -lt 4 ] && binding=log4j-slf4j-impl
sed "s/4\.0\.7/$version/g; s/log4j-slf4j2-impl/$binding/" "$root/jvm/pulsar/pom.xml" > "$work/pom.xml"
rm -rf "$lib" && mkdir -p "$lib"
mvn --batch-mode --quiet -f "$work/pom.xml" -Dmaven.repo.local="$root/.cache/m2" \
  dependency:copy-dependencies -DincludeScope=runtime -Dmdep.prependGroupId=true \
  -DoutputDirectory="$lib"
[ -e "$cache/jars" ] || ln -s ../jars "$cache/jars"
echo "$version" > "$lib/.resolved"
echo "$lib: $(ls "$lib" | wc -l) jars, $(du -sh "$lib" | cut -f1)"
