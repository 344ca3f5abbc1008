#!/usr/bin/env bash
# Fetch the official Java client (rocketmq-client-java, pinned in pom.xml) from Maven Central with
# Maven's ordinary dependency resolution and compile Driver.java against it, into the Ariane cache:
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/maven-repo                         Maven's local repository
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/java-client/<version>/lib       the jars
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/java-client/<version>/classes-<checksum>  the driver
# Idempotent: the compiled driver lives in a directory named by the checksum of pom.xml,
# Driver.java and the javac version, so a warm run is a no-op and two checkouts with different
# drivers (worktrees testing at the same time) never replace each other's classes under a running
# JVM; the jars are fetched again only when pom.xml's content changes. Prints the class path as
# its last line. Nothing fetched here is committed.
# Sibling driver projects reuse this script (tests/conformance/classic/fetch.sh) by setting
# FETCH_PROJECT_DIR (holding pom.xml and the driver), FETCH_DRIVER (the .java file's base name)
# and FETCH_CACHE_NAME (the directory under the cache).
set -euo pipefail
here="${FETCH_PROJECT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
driver="${FETCH_DRIVER:-Driver}"
cache_name="${FETCH_CACHE_NAME:-java-client}"
pom="$here/pom.xml"
cache="${ARIANE_CACHE:-$HOME/.cache/ariane}"
version="$(sed -n 's:.*<client.version>\(.*\)</client.version>.*:\1:p' "$pom")"
[[ -n "$version" ]] || { echo "fetch.sh: no <client.version> in $pom" >&2; exit 2; }
command -v javac >/dev/null || { echo "fetch.sh: a JDK (javac, Java 17) is required" >&2; exit 2; }
home="$cache/$cache_name/$version"
want="$( (cat "$pom" "$here/$driver.java"; javac -version 2>&1) | sha256sum | cut -d' ' -f1)"
classes="$home/classes-${want:0:16}"
stamp="$classes/.stamp"
pom_sum="$(sha256sum < "$pom" | cut -d' ' -f1)"
classpath="$home/lib/*:$classes"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && "$(cat "$home/.lib-stamp" 2>/dev/null)" == "$pom_sum" ]]; then
  echo "$classpath"
  exit 0
fi
mkdir -p "$home"
exec 9>"$home/.lock"
flock 9
if [[ ! -d "$home/lib" || ! -f "$home/.lib-stamp" || "$(cat "$home/.lib-stamp")" != "$pom_sum" ]]; then
  command -v mvn >/dev/null || { echo "fetch.sh: Maven (mvn) is not installed" >&2; exit 2; }
  echo "fetch.sh: resolving the $cache_name dependencies $version with Maven into $home (cold: ~20-60 s)" >&2
  rm -rf "$home/lib.tmp"
  # Maven 3.8 prints colour resets even in batch mode; strip them from the log.
  mvn -B -q -f "$pom" -Dmaven.repo.local="$cache/maven-repo" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$home/lib.tmp" 2>&1 \
    | sed 's/\x1b\[[0-9;]*m//g' >&2
  rm -rf "$home/lib"
  mv "$home/lib.tmp" "$home/lib"
  echo "$pom_sum" > "$home/.lib-stamp"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "fetch.sh: compiling $driver.java" >&2
  rm -rf "$classes.tmp"
  mkdir -p "$classes.tmp"
  javac -nowarn -d "$classes.tmp" -cp "$home/lib/*" "$here/$driver.java" >&2
  echo "$want" > "$classes.tmp/.stamp"
  rm -rf "$classes"
  mv "$classes.tmp" "$classes"
fi
echo "$classpath"
