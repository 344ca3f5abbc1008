#!/usr/bin/env bash
# Build the Ariane image from the project's own Dockerfile, without a Docker engine: buildah (from
# Debian) with chroot isolation and the host network for the build's `pip` steps.
#
# The Dockerfile starts FROM python:3.11-slim-bookworm. When that cannot be pulled (no container
# registry is reachable on these machines), a stand-in of the same name is made from Debian
# packages with mmdebstrap: bookworm minbase + python3 + python3-pip, PEP 668's marker removed (as
# in the official image, pip installs into the system Python) and the host's CA bundle as the
# system bundle, since TLS to PyPI may be intercepted by the host's proxy. The Dockerfile itself is
# untouched: it stays what a user builds with `docker build`.
#
# Cached by content: the key hashes the Dockerfile, pyproject.toml, README.md, every file under
# src/ (no __pycache__) and this script. Output: ${TESTENV_CACHE:-$HOME/.cache/ariane}/image-<key>/
# {ariane.tar, ariane-client.tar (docker-archives), IMAGE and CLIENT_IMAGE (their names,
# localhost/ariane[-client]:<key>), STAMP}. The client image adds the official RocketMQ Python
# client (e2e/testenv/Dockerfile.client). buildah's storage
# lives in the cache too (image-overlay/, the kernel's overlay driver: layers are stored as diffs,
# where the vfs driver kept a full copy of the file system per layer, ~16 GB for five builds), so
# the base image is reused. Only the newest KEEP_BUILDS builds are kept; the untagged intermediate
# images of `--layers` are pruned after each build (every src/ change rebuilds the wheel stage, so
# they are never reused), and a store of the old vfs layout (image-store/) is removed.
#
# Usage: build-image.sh [REPO_ROOT]     build if needed; the last stdout line is the output dir
#        build-image.sh --check [ROOT]  exit 0 and print the dir if built, else exit 3
set -euo pipefail

CHECK=0
if [[ ${1:-} == --check ]]; then CHECK=1; shift; fi
SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(readlink -f "${1:-$(dirname "$SELF")/../..}")
ROOT=${TESTENV_CACHE:-$HOME/.cache/ariane}
BASE_NAME=docker.io/library/python:3.11-slim-bookworm
BASE_PACKAGES=python3,python3-pip,ca-certificates,passwd

log() { printf '[testenv-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

KEY=$( { sha256sum "$SELF"
         cd "$REPO"
         sha256sum Dockerfile pyproject.toml README.md e2e/testenv/Dockerfile.client
         find src -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
           | xargs -0 sha256sum; } | sha256sum | cut -c1-12)
OUT=$ROOT/image-$KEY
IMAGE=localhost/ariane:$KEY
CLIENT_IMAGE=localhost/ariane-client:$KEY
is_built() { [[ -f $OUT/STAMP && -f $OUT/ariane.tar && -f $OUT/ariane-client.tar ]]; }

if (( CHECK )); then
  if is_built; then echo "$OUT"; exit 0; else exit 3; fi
fi
if is_built; then log "cached: $OUT ($IMAGE)"; echo "$OUT"; exit 0; fi

[[ $(id -u) == 0 ]] || die "building the image needs root (buildah, mmdebstrap)"
command -v buildah >/dev/null || die "buildah missing: run e2e/testenv/build-node.sh (installs it)"
mkdir -p "$ROOT"
exec 9>"$ROOT/.build-image.lock"
flock 9
if is_built; then log "cached: $OUT ($IMAGE)"; echo "$OUT"; exit 0; fi

T0=$SECONDS
STORE=$ROOT/image-overlay
KEEP_BUILDS=3
BUILDAH=(nice -n 19 buildah --root "$STORE/root" --runroot "$STORE/runroot" --storage-driver overlay)
if [[ -d $ROOT/image-store/root/vfs ]]; then
  log "removing the old vfs image store ($(du -sh "$ROOT/image-store" | cut -f1))"
  rm -rf "$ROOT/image-store"
fi
rm -rf "$OUT"
mkdir -p "$OUT/logs" "$STORE"

# ---------------------------------------------------------------- 1. base image
if "${BUILDAH[@]}" inspect --type image "$BASE_NAME" >/dev/null 2>&1; then
  log "base image $BASE_NAME: in the local store"
elif timeout 60 "${BUILDAH[@]}" pull --retry 0 "$BASE_NAME" >"$OUT/logs/pull.log" 2>&1; then
  log "base image $BASE_NAME: pulled from the registry"
else
  log "base image $BASE_NAME: registry unreachable ($(tail -n 1 "$OUT/logs/pull.log")); making it from Debian"
  B=$OUT/base
  mkdir -p "$B"
  cp /etc/ssl/certs/ca-certificates.crt "$B/host-ca.crt"
  # shellcheck disable=SC2016  # $1 is expanded by mmdebstrap's hook shell
  nice -n 19 mmdebstrap --variant=minbase --include="$BASE_PACKAGES" \
    --customize-hook="cp '$B/host-ca.crt' \"\$1/etc/ssl/certs/ca-certificates.crt\"" \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='ln -sf python3 "$1/usr/bin/python"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm "$B/rootfs.tar" http://deb.debian.org/debian >"$OUT/logs/mmdebstrap.log" 2>&1 \
    || { tail -n 30 "$OUT/logs/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
  log "Debian rootfs built ($((SECONDS - T0)) s)"
  ctr=$("${BUILDAH[@]}" from --pull=never scratch)
  "${BUILDAH[@]}" add "$ctr" "$B/rootfs.tar" / >/dev/null
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 \
    --label org.ariane.base="Debian bookworm stand-in for $BASE_NAME (e2e/testenv)" "$ctr"
  "${BUILDAH[@]}" commit --rm "$ctr" "$BASE_NAME" >/dev/null
  rm -rf "$B"
fi

# ---------------------------------------------------------------- 2. the project's Dockerfile
log "buildah bud $REPO/Dockerfile -> $IMAGE"
"${BUILDAH[@]}" bud --isolation chroot --network host --pull=never --layers \
  -f "$REPO/Dockerfile" -t "$IMAGE" "$REPO" >"$OUT/logs/bud.log" 2>&1 \
  || { tail -n 40 "$OUT/logs/bud.log" >&2; die "buildah bud failed (log: $OUT/logs/bud.log)"; }
log "buildah bud e2e/testenv/Dockerfile.client -> $CLIENT_IMAGE"
"${BUILDAH[@]}" bud --isolation chroot --network host --pull=never --layers --build-arg "BASE=$IMAGE" \
  -f "$REPO/e2e/testenv/Dockerfile.client" -t "$CLIENT_IMAGE" "$REPO/e2e/testenv" \
  >"$OUT/logs/bud-client.log" 2>&1 \
  || { tail -n 40 "$OUT/logs/bud-client.log" >&2; die "buildah bud of the client image failed"; }
for name in "$IMAGE" "$CLIENT_IMAGE"; do
  file=$OUT/$(basename "${name%%:*}").tar
  "${BUILDAH[@]}" push "$name" "docker-archive:$file:$name" >"$OUT/logs/push.log" 2>&1 \
    || { tail -n 20 "$OUT/logs/push.log" >&2; die "buildah push of $name failed"; }
done
echo "$IMAGE" > "$OUT/IMAGE"
echo "$CLIENT_IMAGE" > "$OUT/CLIENT_IMAGE"
echo "$KEY" > "$OUT/STAMP"
# Keep the newest KEEP_BUILDS builds; older ones are dropped with their store images, then the
# untagged intermediate images (dangling once their build's tags are gone or superseded).
for old in $(ls -1dt "$ROOT"/image-[0-9a-f]* 2>/dev/null | tail -n +$((KEEP_BUILDS + 1))); do
  "${BUILDAH[@]}" rmi "localhost/ariane-client:${old##*/image-}" "localhost/ariane:${old##*/image-}" \
    >/dev/null 2>&1 || true
  rm -rf "$old"
done
"${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
log "built in $((SECONDS - T0)) s: $OUT ($IMAGE)"
echo "$OUT"
