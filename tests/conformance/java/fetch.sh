#!/usr/bin/env bash
# Fetch the official Java client (rocketmq-client-java, pinned in pom.xml) from Maven Central with
# Maven's ordinary dependency resolution and compile Driver.java against it, into the Ariane cache:
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/maven-repo                         Maven's local repository
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/java-client/<version>/{lib,classes} jars and the driver
# Idempotent: a stamp holding the checksum of pom.xml, Driver.java and the javac version makes a
# warm run a no-op. Prints the class path as its last line. Nothing fetched here is committed.
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
stamp="$home/.stamp"
want="$( (cat "$pom" "$here/$driver.java"; javac -version 2>&1) | sha256sum | cut -d' ' -f1)"
classpath="$home/lib/*:$home/classes"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$classpath"
  exit 0
fi
mkdir -p "$home"
exec 9>"$home/.lock"
flock 9
if [[ ! -d "$home/lib" || ! -f "$home/.lib-stamp" || "$(cat "$home/.lib-stamp")" != "$(sha256sum "$pom")" ]]; then
  command -v mvn >/dev/null || { echo "fetch.sh: Maven (mvn) is not installed" >&2; exit 2; }
  echo "fetch.sh: resolving the $cache_name dependencies $version with Maven into $home (cold: ~20-60 s)" >&2
  rm -rf "$home/lib.tmp"
  # Maven 3.8 prints colour resets even in batch mode; strip them from the log.
  mvn -B -q -f "$pom" -Dmaven.repo.local="$cache/maven-repo" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$home/lib.tmp" 2>&1 \
    | sed 's/\x1b\[[0-9;]*m//g' >&2
  rm -rf "$home/lib"
  mv "$home/lib.tmp" "$home/lib"
  sha256sum "$pom" > "$home/.lib-stamp"
fi
echo "fetch.sh: compiling $driver.java" >&2
rm -rf "$home/classes"
mkdir -p "$home/classes"
javac -nowarn -d "$home/classes" -cp "$home/lib/*" "$here/$driver.java" >&2
echo "$want" > "$stamp"
echo "$classpath"
