#!/usr/bin/env bash
# Fetch the official classic Java client (rocketmq-client, pinned in pom.xml) with Maven into the
# Ariane cache and compile BenchDriver.java against it:
# ${ARIANE_CACHE:-$HOME/.cache/ariane}/classic-java-bench/<version>. The work is
# tools/fetch-java-driver.sh's (idempotent, stamped); prints the class path as its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FETCH_PROJECT_DIR="$here" FETCH_DRIVER=BenchDriver FETCH_CACHE_NAME=classic-java-bench \
  exec "$here/../../tools/fetch-java-driver.sh"
