#!/bin/sh
# Build upstream Prometheus with Kubernetes service discovery from the Go module proxy, into
# ~/.cache/ariane/prometheus-k8s-<version>/ (Debian's package, which install.sh fetches, is
# patched to leave kubernetes_sd_configs out). Only the kubernetes SD is compiled in
# (-tags remove_all_sd,enable_kubernetes_sd). The module's go.mod has replace directives, so
# `go install pkg@version` refuses it: a wrapper module repeats them. Idempotent; prints the
# directory holding the binary. One build at a time (flock). Cold: a few minutes on 2 busy
# cores (dependencies downloaded into the shared module cache); warm: nothing.
set -eu
version=v0.55.1 # Prometheus 2.55.1
root="${ARIANE_CACHE:-$HOME/.cache/ariane}"
out="$root/prometheus-k8s-$version"
if [ -x "$out/prometheus" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [ -x "$out/prometheus" ]; then
    echo "$out"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/go.mod" <<MOD
module ariane.test/prometheus-k8s

go 1.22.0

require github.com/prometheus/prometheus $version

replace (
	k8s.io/klog => github.com/simonpasquier/klog-gokit v0.3.0
	k8s.io/klog/v2 => github.com/simonpasquier/klog-gokit/v3 v3.5.0
)

exclude github.com/linode/linodego v1.0.0
MOD
printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/prometheus/prometheus/cmd/prometheus"\n' >"$work/tools.go"
export GOMODCACHE="$root/gomod" GOCACHE="$root/gobuild" GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="-modcacherw -buildvcs=false -mod=mod"
cd "$work"
v=github.com/prometheus/common/version
nice -n 19 go build -trimpath -ldflags "-s -w -X $v.Version=2.55.1 -X $v.Branch=module-proxy" \
    -tags remove_all_sd,enable_kubernetes_sd \
    -o "$out/prometheus.tmp" github.com/prometheus/prometheus/cmd/prometheus >&2
mv "$out/prometheus.tmp" "$out/prometheus"
echo "$out"
