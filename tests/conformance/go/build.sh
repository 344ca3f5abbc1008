#!/usr/bin/env bash
# Build the Go driver (main.go) against the official Go client pinned in go.mod/go.sum, fetched
# from the Go module proxy, into the Ariane cache:
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/go-client/{gomod,gobuild}   module and build caches
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/go-client/godriver-<stamp>  the binary
# <stamp> is a short hash of go.mod, go.sum, main.go and the Go version: a warm run finds the
# binary and exits. Prints the binary's path as its last line. Nothing is written to the repo.
# Another Go driver reuses this script by setting GO_DRIVER_DIR (its go.mod, go.sum, main.go),
# GO_DRIVER_CACHE (its cache directory's name) and GO_DRIVER_NAME (its binary's name).
set -euo pipefail
here="${GO_DRIVER_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
cache="${ARIANE_CACHE:-$HOME/.cache/ariane}/${GO_DRIVER_CACHE:-go-client}"
command -v go >/dev/null || { echo "build.sh: a Go toolchain (go) is required" >&2; exit 2; }
stamp="$( (cat "$here/go.mod" "$here/go.sum" "$here/main.go"; GOTOOLCHAIN=local go env GOVERSION) \
  | sha256sum | cut -c1-12)"
binary="$cache/${GO_DRIVER_NAME:-godriver}-$stamp"
if [[ -x "$binary" ]]; then
  echo "$binary"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ ! -x "$binary" ]]; then
  echo "build.sh: building ${GO_DRIVER_NAME:-godriver} into $binary (cold: downloads + compile, ~1-3 min)" >&2
  ( cd "$here" && GOMODCACHE="$cache/gomod" GOCACHE="$cache/gobuild" GOTOOLCHAIN=local \
      GOFLAGS=-mod=readonly go build -o "$binary.tmp" . ) >&2
  mv "$binary.tmp" "$binary"
fi
echo "$binary"
