#!/usr/bin/env bash
# Build the classic Go driver (main.go) against the official classic Go client
# github.com/apache/rocketmq-client-go/v2 (Remoting), pinned in go.mod/go.sum and fetched from the
# Go module proxy, into ${ARIANE_CACHE:-$HOME/.cache/ariane}/go-classic-client/goclassic-<stamp>
# (module and build caches beside it). The steps are ../go/build.sh's: a warm run finds the
# binary and exits. Prints the binary's path as its last line. Nothing is written to the repo.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO_DRIVER_DIR="$here" GO_DRIVER_CACHE=go-classic-client GO_DRIVER_NAME=goclassic \
  exec bash "$here/../go/build.sh"
