#!/usr/bin/env bash
# Build what the SparkApplication e2e test runs on the real node (e2e/test_e2e_spark_realnode.py):
#   1. the Kubeflow spark-operator binary, from its Go module on the module proxy (the version
#      e2e/operator_support.py pins), with the replace directives of its go.mod honoured (so
#      built inside a copy of the module, as `go install mod@ver` refuses replace directives);
#   2. Spark's image `spark:4.2.0-python3`: pulled when a registry answers, else a stand-in of the
#      same name made from Debian packages (bookworm: openjdk-17-jre-headless, python3, tini,
#      nss_wrapper) with /opt/spark = the PyPI pyspark distribution of that version (bin/, jars/,
#      sbin/, python/lib/{pyspark,py4j}.zip: the layout of a Spark release), the `spark` user
#      (uid 185), WORKDIR /opt/spark/work-dir and /opt/entrypoint.sh (spark-entrypoint.sh:
#      Spark's driver/executor/pass-through entrypoint behaviour);
#   3. the flights job's image from examples/spark/Dockerfile, unchanged (buildah, as
#      build-image.sh builds the Ariane image; the wheel stage's python:3.11-slim-bookworm is
#      the one build-image.sh made);
#   4. the spark-operator's image (Dockerfile.spark-operator: Spark's image + the binary + the
#      module's entrypoint.sh), which the module's Helm chart runs.
#
# Cached by content. Output: ${TESTENV_CACHE:-$HOME/.cache/ariane}/spark-<key>/{ariane-spark.tar,
# spark-operator.tar (docker-archives), SPARK_APP_IMAGE, OPERATOR_IMAGE (their names), STAMP}.
# The key hashes this script, spark-entrypoint.sh, Dockerfile.spark-operator, the operator
# version, and what examples/spark/Dockerfile copies (pyproject.toml, README.md, src/, examples/).
# Images live in build-image.sh's buildah store (image-overlay/); its lock is held while
# building, so the two never prune each other's work. Only the newest KEEP_BUILDS outputs stay.
#
# Usage: build-spark.sh [REPO_ROOT]      build if needed; the last stdout line is the output dir
#        build-spark.sh --check [ROOT]   exit 0 and print the dir if built, else exit 3
set -euo pipefail

CHECK=0
if [[ ${1:-} == --check ]]; then CHECK=1; shift; fi
SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
REPO=$(readlink -f "${1:-$HERE/../..}")
ROOT=${TESTENV_CACHE:-$HOME/.cache/ariane}
OPERATOR_MODULE=github.com/kubeflow/spark-operator/v2
OPERATOR_VERSION=$(sed -nE 's/^SPARK_OPERATOR_VERSION = "([^"]+)"/\1/p' "$REPO/e2e/operator_support.py")
SPARK_VERSION=$(sed -nE 's/.*"pyspark==([0-9.]+)".*/\1/p' "$REPO/pyproject.toml" | head -n 1)
SPARK_BASE=docker.io/library/spark:$SPARK_VERSION-python3
BASE_PACKAGES=openjdk-17-jre-headless,python3,python3-pip,tini,procps,libnss-wrapper,bash,ca-certificates,passwd
JAVA_HOME_DIR=/usr/lib/jvm/java-17-openjdk-amd64
KEEP_BUILDS=2

log() { printf '[testenv-spark %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
[[ -n $OPERATOR_VERSION && -n $SPARK_VERSION ]] || die "no operator version or pyspark pin found"

# The stand-in base's own recipe (a change rebuilds it; a src/ change does not).
BASE_KEY=$( { echo "$SPARK_VERSION $BASE_PACKAGES $JAVA_HOME_DIR"; sha256sum "$HERE/spark-entrypoint.sh"
              sed -n '/^# ---- base recipe/,/^# ---- end of base recipe/p' "$SELF"; } \
            | sha256sum | cut -c1-12)
KEY=$( { sha256sum "$SELF" "$HERE/spark-entrypoint.sh" "$HERE/Dockerfile.spark-operator"
         echo "$OPERATOR_MODULE@$OPERATOR_VERSION"
         cd "$REPO"
         sha256sum examples/spark/Dockerfile pyproject.toml README.md
         find src examples -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 \
           | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-12)
OUT=$ROOT/spark-$KEY
APP_IMAGE=localhost/ariane-spark:$KEY
OPERATOR_IMAGE=localhost/spark-operator:$OPERATOR_VERSION-$KEY
is_built() { [[ -f $OUT/STAMP && -f $OUT/ariane-spark.tar && -f $OUT/spark-operator.tar ]]; }

if (( CHECK )); then
  if is_built; then echo "$OUT"; exit 0; else exit 3; fi
fi
if is_built; then log "cached: $OUT"; echo "$OUT"; exit 0; fi

[[ $(id -u) == 0 ]] || die "building the images needs root (buildah, mmdebstrap)"
command -v buildah >/dev/null || die "buildah missing: run e2e/testenv/build-node.sh (installs it)"
command -v go >/dev/null || die "no Go toolchain on PATH"
mkdir -p "$ROOT"
exec 8>"$ROOT/.build-spark.lock"
flock 8
if is_built; then log "cached: $OUT"; echo "$OUT"; exit 0; fi
T0=$SECONDS
rm -rf "$OUT"
mkdir -p "$OUT/logs" "$OUT/operator"

# ---------------------------------------------------------------- 1. spark-operator binary
BIN=$ROOT/spark-operator-$OPERATOR_VERSION/spark-operator
if [[ ! -x $BIN ]]; then
  export GOMODCACHE=$ROOT/gomod GOCACHE=$ROOT/gobuild GOTOOLCHAIN=local CGO_ENABLED=0
  export GOFLAGS="-modcacherw -buildvcs=false"
  DIR=$(cd "$(mktemp -d)" && go mod download -json "$OPERATOR_MODULE@$OPERATOR_VERSION" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  SRC=$ROOT/spark-operator-$OPERATOR_VERSION/src
  rm -rf "$SRC" && mkdir -p "$SRC" && cp -r "$DIR/." "$SRC/" && chmod -R u+w "$SRC"
  log "go build spark-operator $OPERATOR_VERSION (cold: a few minutes)"
  (cd "$SRC" && nice -n 19 go build -p "${TESTENV_GO_JOBS:-2}" -trimpath \
     -ldflags "-s -w" -o "$BIN.tmp" ./cmd/operator) \
     >"$OUT/logs/go-build.log" 2>&1 || { tail -n 30 "$OUT/logs/go-build.log" >&2; die "go build failed"; }
  mv "$BIN.tmp" "$BIN"
  rm -rf "$SRC"
fi
cp "$BIN" "$OUT/operator/spark-operator"
cp "$(cd "$(mktemp -d)" && GOMODCACHE=$ROOT/gomod GOFLAGS=-modcacherw go mod download -json \
      "$OPERATOR_MODULE@$OPERATOR_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/entrypoint.sh" \
   "$OUT/operator/entrypoint.sh"
chmod 755 "$OUT/operator/"*

# The buildah store and lock of build-image.sh (it makes python:3.11-slim-bookworm there).
exec 9>"$ROOT/.build-image.lock"
flock 9
STORE=$ROOT/image-overlay
BUILDAH=(nice -n 19 buildah --root "$STORE/root" --runroot "$STORE/runroot" --storage-driver overlay)
"${BUILDAH[@]}" inspect --type image docker.io/library/python:3.11-slim-bookworm >/dev/null 2>&1 \
  || die "python:3.11-slim-bookworm is not in $STORE: run e2e/testenv/build-image.sh first"

# ---------------------------------------------------------------- 2. Spark's image
base_recipe() { "${BUILDAH[@]}" inspect --type image \
  --format '{{index .OCIv1.Config.Labels "org.ariane.recipe"}}' "$SPARK_BASE" 2>/dev/null || true; }
if [[ $(base_recipe) == "$BASE_KEY" ]]; then
  log "base image $SPARK_BASE: the Debian stand-in of this recipe, in the local store"
elif "${BUILDAH[@]}" inspect --type image "$SPARK_BASE" >/dev/null 2>&1 && [[ -z $(base_recipe) ]]; then
  log "base image $SPARK_BASE: in the local store (pulled)"
elif timeout 60 "${BUILDAH[@]}" pull --retry 0 "$SPARK_BASE" >"$OUT/logs/pull.log" 2>&1; then
  log "base image $SPARK_BASE: pulled from the registry"
else
  log "base image $SPARK_BASE: registry unreachable ($(tail -n 1 "$OUT/logs/pull.log")); making it from Debian"
  B=$OUT/base
  mkdir -p "$B"
  cp /etc/ssl/certs/ca-certificates.crt "$B/host-ca.crt"
  cp "$HERE/spark-entrypoint.sh" "$B/entrypoint.sh"
# ---- base recipe (hashed into BASE_KEY)
  # shellcheck disable=SC2016  # $1 is expanded by mmdebstrap's hook shell
  nice -n 19 mmdebstrap --variant=minbase --include="$BASE_PACKAGES" \
    --customize-hook="cp '$B/host-ca.crt' \"\$1/etc/ssl/certs/ca-certificates.crt\"" \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='chroot "$1" groupadd --system --gid 185 spark' \
    --customize-hook='chroot "$1" useradd --system --uid 185 --gid spark -d /nonexistent spark' \
    --customize-hook="chroot \"\$1\" env -i PATH=/usr/bin:/bin HOME=/root python3 -m pip install \
        --no-cache-dir --no-deps --target /opt/spark-dist pyspark==$SPARK_VERSION" \
    --customize-hook='mv "$1/opt/spark-dist/pyspark" "$1/opt/spark" && rm -rf "$1/opt/spark-dist"' \
    --customize-hook='mkdir -p "$1/opt/spark/work-dir" && chmod g+w "$1/opt/spark/work-dir"' \
    --customize-hook='touch "$1/opt/spark/RELEASE" && chown -R 185:185 "$1/opt/spark"' \
    --customize-hook="install -m 755 '$B/entrypoint.sh' \"\$1/opt/entrypoint.sh\"" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/root/.cache' \
    bookworm "$B/rootfs.tar" http://deb.debian.org/debian >"$OUT/logs/mmdebstrap.log" 2>&1 \
    || { tail -n 30 "$OUT/logs/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
# ---- end of base recipe
  log "Debian rootfs built ($((SECONDS - T0)) s)"
  ctr=$("${BUILDAH[@]}" from --pull=never scratch)
  "${BUILDAH[@]}" add "$ctr" "$B/rootfs.tar" / >/dev/null
  "${BUILDAH[@]}" config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --env SPARK_HOME=/opt/spark --env JAVA_HOME=$JAVA_HOME_DIR \
    --workingdir /opt/spark/work-dir --user 185 --entrypoint '["/opt/entrypoint.sh"]' \
    --label org.ariane.recipe="$BASE_KEY" \
    --label org.ariane.base="Debian bookworm stand-in for $SPARK_BASE (e2e/testenv/build-spark.sh)" \
    "$ctr"
  "${BUILDAH[@]}" commit --rm "$ctr" "$SPARK_BASE" >/dev/null
  rm -rf "$B"
fi

# ---------------------------------------------------------------- 3. + 4. the two images
log "buildah bud examples/spark/Dockerfile -> $APP_IMAGE"
"${BUILDAH[@]}" bud --isolation chroot --network host --pull=never --layers \
  -f "$REPO/examples/spark/Dockerfile" -t "$APP_IMAGE" "$REPO" >"$OUT/logs/bud-app.log" 2>&1 \
  || { tail -n 40 "$OUT/logs/bud-app.log" >&2; die "buildah bud failed (log: $OUT/logs/bud-app.log)"; }
log "buildah bud Dockerfile.spark-operator -> $OPERATOR_IMAGE"
"${BUILDAH[@]}" bud --isolation chroot --network host --pull=never --layers \
  --build-arg "SPARK_IMAGE=$SPARK_BASE" -f "$HERE/Dockerfile.spark-operator" \
  -t "$OPERATOR_IMAGE" "$OUT/operator" >"$OUT/logs/bud-operator.log" 2>&1 \
  || { tail -n 40 "$OUT/logs/bud-operator.log" >&2; die "buildah bud of the operator image failed"; }
for pair in "$APP_IMAGE ariane-spark" "$OPERATOR_IMAGE spark-operator"; do
  read -r name file <<<"$pair"
  "${BUILDAH[@]}" push "$name" "docker-archive:$OUT/$file.tar:$name" >"$OUT/logs/push.log" 2>&1 \
    || { tail -n 20 "$OUT/logs/push.log" >&2; die "buildah push of $name failed"; }
done
rm -rf "$OUT/operator"
echo "$APP_IMAGE" >"$OUT/SPARK_APP_IMAGE"
echo "$OPERATOR_IMAGE" >"$OUT/OPERATOR_IMAGE"
echo "$KEY" >"$OUT/STAMP"
for old in $(ls -1dt "$ROOT"/spark-[0-9a-f]* 2>/dev/null | tail -n +$((KEEP_BUILDS + 1))); do
  "${BUILDAH[@]}" rmi "localhost/ariane-spark:${old##*/spark-}" \
    "localhost/spark-operator:$OPERATOR_VERSION-${old##*/spark-}" >/dev/null 2>&1 || true
  rm -rf "$old"
done
"${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
log "built in $((SECONDS - T0)) s: $OUT ($APP_IMAGE, $OPERATOR_IMAGE)"
echo "$OUT"
