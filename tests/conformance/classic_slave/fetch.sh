#!/usr/bin/env bash
# Fetch the official classic Java client (org.apache.rocketmq:rocketmq-client, pinned in
# ../classic_java/pom.xml, which pom.xml links to) with Maven into the Ariane cache and compile
# SlaveDriver.java against it: ${ARIANE_CACHE:-$HOME/.cache/ariane}/classic-slave-client/<version>.
# The work is ../java/fetch.sh's (idempotent, stamped); prints the class path as its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FETCH_PROJECT_DIR="$here" FETCH_DRIVER=SlaveDriver FETCH_CACHE_NAME=classic-slave-client \
  exec "$here/../java/fetch.sh"
