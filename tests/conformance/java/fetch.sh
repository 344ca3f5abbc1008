#!/usr/bin/env bash
# Usage: fetch.sh [VERSION]
# Fetch the official Java client (rocketmq-client-java: VERSION, else the one pinned in pom.xml)
# with Maven into the Ariane cache and compile Driver.java against it:
# ${ARIANE_CACHE:-$HOME/.cache/ariane}/java-client/<version>. One driver source serves every
# version the tests run (polyglot.JAVA_VERSIONS), so it must compile against each of them.
# The work is tools/fetch-java-driver.sh's (idempotent, stamped); prints the class path as its last
# line. The sibling projects (classic, classic_java, classic_slave) run this script with their own
# FETCH_PROJECT_DIR, FETCH_DRIVER and FETCH_CACHE_NAME, which are passed on.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FETCH_PROJECT_DIR="${FETCH_PROJECT_DIR:-$here}" FETCH_DRIVER="${FETCH_DRIVER:-Driver}" \
  FETCH_CACHE_NAME="${FETCH_CACHE_NAME:-java-client}" FETCH_CLIENT_VERSION="${1:-}" \
  exec "$here/../../../tools/fetch-java-driver.sh"
