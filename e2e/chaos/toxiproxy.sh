#!/usr/bin/env bash
# Build Toxiproxy's server (github.com/Shopify/toxiproxy/v2/cmd/server at TOXIPROXY_VERSION,
# from the Go module proxy, checked against the Go checksum database) into the Ariane cache:
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/toxiproxy/{gomod,gobuild}   module and build caches
#   ${ARIANE_CACHE:-$HOME/.cache/ariane}/toxiproxy/toxiproxy-<stamp>  the binary
# <stamp> is a short hash of the version and the Go version: a warm run finds the binary and
# exits. Prints the binary's path as its last line. Nothing is written to the repo.
set -euo pipefail
version="${TOXIPROXY_VERSION:-v2.12.0}"
cache="${ARIANE_CACHE:-$HOME/.cache/ariane}/toxiproxy"
command -v go >/dev/null || { echo "toxiproxy.sh: a Go toolchain (go) is required" >&2; exit 2; }
stamp="$( (echo "$version"; GOTOOLCHAIN=local go env GOVERSION) | sha256sum | cut -c1-12)"
binary="$cache/toxiproxy-$stamp"
if [[ -x "$binary" ]]; then
  echo "$binary"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ ! -x "$binary" ]]; then
  echo "toxiproxy.sh: building Toxiproxy $version into $binary (cold: downloads + compile, ~1-2 min)" >&2
  rm -rf "$cache/bin.tmp"
  GOMODCACHE="$cache/gomod" GOCACHE="$cache/gobuild" GOTOOLCHAIN=local GOBIN="$cache/bin.tmp" \
    go install "github.com/Shopify/toxiproxy/v2/cmd/server@$version" >&2
  mv "$cache/bin.tmp/server" "$binary"
  rm -rf "$cache/bin.tmp"
fi
echo "$binary"
