#!/usr/bin/env bash
# Fetch the official classic Java client (org.apache.rocketmq:rocketmq-client) and mqadmin's
# library (rocketmq-tools), pinned in pom.xml, with Maven into the Ariane cache and compile
# ClassicDriver.java against them: ${ARIANE_CACHE:-$HOME/.cache/ariane}/classic-client/<version>.
# The work is ../java/fetch.sh's (idempotent, stamped); prints the class path as its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FETCH_PROJECT_DIR="$here" FETCH_DRIVER=ClassicDriver FETCH_CACHE_NAME=classic-client \
  exec "$here/../java/fetch.sh"
