#!/usr/bin/env bash
# Usage: maven-copy-deps.sh POM LIB_DIR
# The one Maven command of the repository: resolve POM's runtime dependencies from Maven Central
# with Maven's ordinary dependency resolution (local repository under
# ${ARIANE_CACHE:-$HOME/.cache/ariane}/maven-repo) and copy the jars into LIB_DIR, replacing it
# only once everything was fetched. Used by tools/fetch-java-driver.sh (the Java client drivers)
# and bench/peers/rocketmq/fetch.sh (the RocketMQ peer); they decide when a fetch is due.
# One Maven at a time writes the shared local repository (flock on maven-repo.lock): parallel
# test workers fetching two driver projects at once would otherwise race on the same files.
set -euo pipefail
pom="$1"
lib="$2"
cache="${ARIANE_CACHE:-$HOME/.cache/ariane}"
command -v mvn >/dev/null || { echo "maven-copy-deps.sh: Maven (mvn) is not installed" >&2; exit 2; }
mkdir -p "$(dirname "$lib")" "$cache"
exec 8>"$cache/maven-repo.lock"
flock 8
rm -rf "$lib.tmp"
# Maven 3.8 prints colour resets even in batch mode; strip them from the log.
mvn -B -q -f "$pom" -Dmaven.repo.local="$cache/maven-repo" \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib.tmp" 2>&1 \
  | sed 's/\x1b\[[0-9;]*m//g' >&2
rm -rf "$lib"
mv "$lib.tmp" "$lib"
