#!/usr/bin/env bash
# Build the real test node that runs Ariane's pods (spec k8s-real-node.md): kubelet and kube-proxy
# of the control plane's version, CoreDNS and kube-router (its NetworkPolicy firewall only, see
# e2e/testenv/netpolicy.py), from the Go module proxy, plus a pause image built from Kubernetes'
# own pause.c (registry.k8s.io is not reachable here). containerd, runc, the CNI plugins and
# ipset come from Debian: missing packages are installed with apt-get (root only).
#
# Why kube-router and not sigs.k8s.io/kube-network-policies (SIG Network's agent): the latter
# queues packets with nftables' native `queue` expression, and this kernel is built without
# CONFIG_NFT_QUEUE (`nft add rule ... queue num 100` fails: "No such file or directory").
# kube-router filters with iptables and ipsets, which the kernel has. The Go module proxy serves
# kube-router v2.1.0 only (newer tags: "This module version is not available").
#
# Output: ${TESTENV_CACHE:-$HOME/.cache/ariane}/node-<stamp>/{bin/{kubelet,kube-proxy,coredns,
# kube-router},pause-oci.tar,STAMP}. STAMP is written last: its presence means a complete build. The Go caches
# are shared with build.sh (gomod/, gobuild/), so on top of its control-plane build the kubelet and
# kube-proxy cost one or two minutes cold. Nothing is written to the repo.
#
# Usage: build-node.sh            install packages and build if needed; last stdout line: the dir
#        build-node.sh --check    exit 0 and print the dir if built (and packages present), else 3
# Env: TESTENV_CACHE, TESTENV_GO_JOBS, K8S_VERSION (must match build.sh), COREDNS_VERSION,
#      KUBE_ROUTER_VERSION.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.36.3}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-v2.1.0}
JOBS=${TESTENV_GO_JOBS:-2}
ROOT=${TESTENV_CACHE:-$HOME/.cache/ariane}
SELF=$(readlink -f "${BASH_SOURCE[0]}")
# Debian packages the node needs, and one binary each proves it is installed.
PACKAGES=(containerd runc containernetworking-plugins iptables umoci buildah mmdebstrap uidmap conntrack
          ipset)
PROBES=(/usr/bin/containerd /usr/sbin/runc /usr/lib/cni/bridge /usr/sbin/iptables /usr/bin/umoci
        /usr/bin/buildah /usr/bin/mmdebstrap /usr/bin/newuidmap /usr/sbin/conntrack /usr/sbin/ipset)

log() { printf '[testenv-node %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

packages_present() { local p; for p in "${PROBES[@]}"; do [[ -x $p ]] || return 1; done; }

GOVERSION=$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null || echo none)
SCRIPT_SUM=$(sha256sum "$SELF" | cut -c1-16)
STAMP="k8s=$K8S_VERSION coredns=$COREDNS_VERSION kube-router=$KUBE_ROUTER_VERSION $GOVERSION script=$SCRIPT_SUM"
OUT=$ROOT/node-$(printf '%s' "$STAMP" | sha256sum | cut -c1-12)
BIN=$OUT/bin
is_built() { [[ -f $OUT/STAMP && $(<"$OUT/STAMP") == "$STAMP" ]] && packages_present; }

case ${1:-} in
  --check) if is_built; then echo "$OUT"; exit 0; else exit 3; fi ;;
  "") ;;
  *) die "unknown argument: $1" ;;
esac

if ! packages_present; then
  [[ $(id -u) == 0 ]] || die "missing Debian packages (${PACKAGES[*]}) and not root: install them"
  log "installing Debian packages: ${PACKAGES[*]}"
  nice -n 19 apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive nice -n 19 apt-get install -y -q --no-install-recommends \
    "${PACKAGES[@]}" >&2
  packages_present || die "packages installed but a probe binary is missing: ${PROBES[*]}"
fi

if is_built; then log "cached: $OUT"; echo "$OUT"; exit 0; fi

command -v go >/dev/null || die "no Go toolchain on PATH (see the README, 'Test environment')"
mkdir -p "$ROOT"
exec 9>"$ROOT/.build-node.lock"
flock 9
if is_built; then log "cached: $OUT"; echo "$OUT"; exit 0; fi

export GOMODCACHE=$ROOT/gomod GOCACHE=$ROOT/gobuild GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-modcacherw -buildvcs=false"
GO=(nice -n 19 go)
T0=$SECONDS
rm -rf "$OUT"
mkdir -p "$BIN" "$OUT/src/k8s" "$OUT/logs"
log "cold build of $STAMP into $OUT"

run_logged() {  # LABEL CMD...: run CMD with its output in logs/LABEL.log; show the tail on failure
  local label=$1; shift
  log "$label ..."
  "$@" >"$OUT/logs/$label.log" 2>&1 || { tail -n 30 "$OUT/logs/$label.log" >&2; die "$label failed"; }
  log "$label done ($((SECONDS - T0)) s so far)"
}

# ------------------------------------------ 1. kubelet + kube-proxy (same wrapper as build.sh)
J=$(cd "$(mktemp -d)" && "${GO[@]}" mod download -json "k8s.io/kubernetes@$K8S_VERSION")
K8S_GOMOD=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["GoMod"])' "$J")
KDIR=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["Dir"])' "$J")
MINOR=$(cut -d. -f2 <<<"$K8S_VERSION")
STAGING="v0.${K8S_VERSION#v1.}"
cd "$OUT/src/k8s"
{ echo "module local.test/k8snodebuild"; echo
  awk '$1=="go"{print; exit}' "$K8S_GOMOD"
  awk '/^godebug \(/{b=1} b{print; if(/^\)/)b=0; next} /^godebug /{print}' "$K8S_GOMOD"
  echo; echo "require k8s.io/kubernetes $K8S_VERSION"; echo; echo "replace ("
  sed -nE 's#^[[:space:]]*(k8s\.io/[A-Za-z0-9._-]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\t\1 => \1 '"$STAGING"'#p' "$K8S_GOMOD"
  echo ")"; } > go.mod
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kubelet"\n\t_ "k8s.io/kubernetes/cmd/kube-proxy"\n)\n' > tools.go
run_logged k8s-tidy "${GO[@]}" mod tidy
LD="-s -w"
for kv in "gitVersion=$K8S_VERSION" gitMajor=1 "gitMinor=$MINOR" gitTreeState=clean \
          "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
  LD+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
run_logged kubelet "${GO[@]}" build -p "$JOBS" -trimpath -ldflags "$LD" -o "$BIN/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
got=$("$BIN/kubelet" --version)
[[ $got == "Kubernetes $K8S_VERSION" ]] || die "kubelet --version says '$got'"

# ------------------------------------------ 2. CoreDNS (no replace directives: go install works)
run_logged coredns env GOBIN="$BIN" "${GO[@]}" install -p "$JOBS" -trimpath -ldflags "-s -w" \
  "github.com/coredns/coredns@$COREDNS_VERSION"
"$BIN/coredns" -version >&2

# ------------------------------------------ 3. kube-router (no replace directives: go install works)
KRV=github.com/cloudnativelabs/kube-router/v2/pkg/version
run_logged kube-router env GOBIN="$BIN" "${GO[@]}" install -p "$JOBS" -trimpath \
  -ldflags "-s -w -X $KRV.Version=$KUBE_ROUTER_VERSION -X $KRV.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
"$BIN/kube-router" --version >&2

# ------------------------------------------ 4. pause image (static pause.c, OCI layout via umoci)
P=$OUT/pause-build
mkdir -p "$P/rootfs"
gcc -Os -static -DVERSION="$K8S_VERSION-ariane" -o "$P/rootfs/pause" "$KDIR/build/pause/linux/pause.c"
strip "$P/rootfs/pause"
tar -C "$P/rootfs" -cf "$P/layer.tar" pause
(cd "$P" && umoci init --layout oci && umoci new --image oci:pause \
  && umoci raw add-layer --image oci:pause layer.tar \
  && umoci config --image oci:pause --config.entrypoint /pause --config.user 65535:65535 \
  && tar -C oci -cf "$OUT/pause-oci.tar" .) >"$OUT/logs/pause.log" 2>&1 \
  || { cat "$OUT/logs/pause.log" >&2; die "pause image failed"; }
rm -rf "$P"

echo "$STAMP" > "$OUT/STAMP"
find "$ROOT" -mindepth 1 -maxdepth 1 -name 'node-*' ! -path "$OUT" -mmin +1440 \
  -exec rm -rf {} + 2>/dev/null || true
log "built in $((SECONDS - T0)) s: $OUT"
echo "$OUT"
