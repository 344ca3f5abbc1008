#!/usr/bin/env bash
# Fetch an official RocketMQ Java client (the dependencies of a driver project's pom.xml) from
# Maven Central with Maven's ordinary dependency resolution and compile the project's driver
# against it, into the Ariane cache:
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/maven-repo                       Maven's local repository
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/<cache name>/<version>/lib       the jars
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/<cache name>/<version>/classes-<checksum>  the driver
# Shared by every driver project: the conformance drivers (tests/conformance/java for the v5
# gRPC client, tests/conformance/classic_java for the classic Remoting client and mqadmin) and the
# benchmark's (bench/java); the Maven command itself is tools/maven-copy-deps.sh. Each project
# runs this script with
#   FETCH_PROJECT_DIR  the directory holding pom.xml (<client.version>) and the driver's sources
#                      (every *.java there is compiled together)
#   FETCH_DRIVER       the driver's main class (its .java file must exist there)
#   FETCH_CACHE_NAME   the directory under the cache
#   FETCH_CLIENT_VERSION  optional: resolve this version instead of pom.xml's <client.version>
#                      (the one driver source built against another client version: Maven reads
#                      a copy of pom.xml with the version replaced, kept beside the jars)
# Idempotent: the compiled driver lives in a directory named by the checksum of pom.xml, the
# driver's sources and the javac version, so a warm run is a no-op and two checkouts with different drivers
# (worktrees testing at the same time) never replace each other's classes under a running JVM;
# the jars are fetched again only when pom.xml's content changes. Prints the class path as its
# last line. Nothing fetched here is committed.
set -euo pipefail
here="${FETCH_PROJECT_DIR:?set FETCH_PROJECT_DIR (the driver project)}"
driver="${FETCH_DRIVER:?set FETCH_DRIVER (the driver .java base name)}"
cache_name="${FETCH_CACHE_NAME:?set FETCH_CACHE_NAME (its directory under the cache)}"
pom="$here/pom.xml"
cache="${ARIANE_CACHE:-$HOME/.cache/ariane}"
pinned="$(sed -n 's:.*<client.version>\(.*\)</client.version>.*:\1:p' "$pom")"
[[ -n "$pinned" ]] || { echo "fetch.sh: no <client.version> in $pom" >&2; exit 2; }
version="${FETCH_CLIENT_VERSION:-$pinned}"
[[ "$version" =~ ^[0-9A-Za-z._-]+$ ]] || { echo "fetch.sh: bad client version '$version'" >&2; exit 2; }
command -v javac >/dev/null || { echo "fetch.sh: a JDK (javac, Java 17) is required" >&2; exit 2; }
home="$cache/$cache_name/$version"
[[ -f "$here/$driver.java" ]] || { echo "fetch.sh: no $driver.java in $here" >&2; exit 2; }
sources=("$here"/*.java)
want="$( (cat "$pom" "${sources[@]}"; javac -version 2>&1) | sha256sum | cut -d' ' -f1)"
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
  echo "fetch.sh: resolving the $cache_name dependencies $version with Maven into $home (cold: ~20-60 s)" >&2
  resolve="$pom"
  if [[ "$version" != "$pinned" ]]; then
    resolve="$home/pom.xml"
    sed "s:<client.version>$pinned</client.version>:<client.version>$version</client.version>:" \
      "$pom" > "$resolve"
  fi
  "$(dirname "${BASH_SOURCE[0]}")/maven-copy-deps.sh" "$resolve" "$home/lib"
  echo "$pom_sum" > "$home/.lib-stamp"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "fetch.sh: compiling ${sources[*]##*/}" >&2
  rm -rf "$classes.tmp"
  mkdir -p "$classes.tmp"
  javac -nowarn -d "$classes.tmp" -cp "$home/lib/*" "${sources[@]}" >&2
  echo "$want" > "$classes.tmp/.stamp"
  rm -rf "$classes"
  mv "$classes.tmp" "$classes"
fi
echo "$classpath"
