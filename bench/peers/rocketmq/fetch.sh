#!/usr/bin/env bash
# Fetch Apache RocketMQ (name server, broker, proxy, admin tools) from Maven Central with Maven's
# ordinary dependency resolution, into the Ariane cache:
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/maven-repo            Maven's local repository
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/rocketmq-<version>/lib the runtime class path (all jars)
# Idempotent: a stamp holding the pom's checksum makes a warm run a no-op (well under a second).
# Prints the lib directory as its last line. Nothing fetched here is committed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pom="$here/pom.xml"
cache="${ARIANE_CACHE:-$HOME/.cache/ariane}"
version="$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$pom")"
[[ -n "$version" ]] || { echo "fetch.sh: no <rocketmq.version> in $pom" >&2; exit 2; }
home="$cache/rocketmq-$version"
stamp="$home/.stamp"
want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -d "$home/lib" ]]; then
  echo "$home/lib"
  exit 0
fi
echo "fetch.sh: resolving RocketMQ $version with Maven into $home (cold: ~20-60 s)" >&2
"$here/../../../tools/maven-copy-deps.sh" "$pom" "$home/lib"
echo "$want" > "$stamp"
echo "$home/lib"
