#!/bin/sh
# Obtain Debian's prometheus package (prometheus + promtool) under ~/.cache/ariane without
# installing it or starting any service: `apt-get download` the .deb, `dpkg-deb -x` it.
# Idempotent; prints the directory holding the two binaries. One install at a time (flock on
# .lock: parallel test workers would otherwise extract over each other).
set -eu
cache="${ARIANE_CACHE:-$HOME/.cache/ariane}/prometheus"
bin="$cache/root/usr/bin"
if [ -x "$bin/promtool" ] && [ -x "$bin/prometheus" ]; then
    echo "$bin"
    exit 0
fi
mkdir -p "$cache"
cd "$cache"
exec 9>.lock
flock 9
if [ -x "$bin/promtool" ] && [ -x "$bin/prometheus" ]; then
    echo "$bin"
    exit 0
fi
if ! ls prometheus_*.deb >/dev/null 2>&1; then
    apt-get download prometheus >&2 || { apt-get update >&2 && apt-get download prometheus >&2; }
fi
rm -rf root
dpkg-deb -x "$(ls prometheus_*.deb | head -n 1)" root
test -x "$bin/promtool"
echo "$bin"
