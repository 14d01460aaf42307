#!/usr/bin/env bash
# Builds the real control plane the Kubernetes e2e tests run, from upstream Go modules pinned in
# tests/cluster/{k8s,kwok}/go.mod (nothing upstream is copied into this repository):
#   etcd (go.etcd.io/etcd/server/v3, the version kubernetes itself requires),
#   kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes),
#   kwok (sigs.k8s.io/kwok: the kubelets of simulated nodes).
#
# The binaries are cached by a key over the module files and this script, under
# ${BERTH_CLUSTER_CACHE:-$HOME/.cache/berth/cluster}/<key>/bin; Go's own build and module
# caches make a rebuild after a change incremental. Prints the bin directory on stdout.
#
# Usage: tests/cluster/build.sh          build (or reuse) and print the bin directory
#        tests/cluster/build.sh --key    print the cache key only
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
k8s_version=v1.37.2
kwok_version=v0.8.0

# Go's own installer puts it in /usr/local/go, which a non-login shell may not have on PATH.
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
    echo "error: the Kubernetes e2e tests build a real control plane from Go modules, and \`go\` is not on PATH" >&2
    echo "help: install Go 1.26 or newer (Debian: \`apt-get install golang\`, or from go.dev) and run again" >&2
    exit 2
fi

key="$(cat "$here/build.sh" "$here/k8s/go.mod" "$here/k8s/go.sum" "$here/kwok/go.mod" "$here/kwok/go.sum" \
    | sha256sum | cut -c1-16)"
if [[ "${1:-}" == "--key" ]]; then
    echo "$key"
    exit 0
fi

cache="${BERTH_CLUSTER_CACHE:-$HOME/.cache/berth/cluster}"
bin="$cache/$key/bin"
tools=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
complete=1
for tool in "${tools[@]}"; do
    [[ -x "$bin/$tool" ]] || complete=0
done
[[ -f "$bin/kwok-stages.yaml" ]] || complete=0
if [[ $complete == 1 ]]; then
    echo "$bin"
    exit 0
fi

mkdir -p "$cache/$key"
tmp="$(mktemp -d "$cache/$key/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
k8s_ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$minor"

echo "building the control plane ($k8s_version, kwok $kwok_version) into $bin" >&2
(
    cd "$here/k8s"
    go build -trimpath -o "$tmp/etcd" go.etcd.io/etcd/server/v3
    for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
        echo "  $cmd" >&2
        go build -trimpath -ldflags "$k8s_ldflags" -o "$tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    done
)
(
    cd "$here/kwok"
    echo "  kwok" >&2
    go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}" \
        -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok
    # KWOK's behaviour is data: its "fast" stages (nodes initialised and kept alive with
    # leases; pods Ready, Jobs' pods Succeeded, deleted pods gone), as its releases ship them
    # in the module, gathered into one config file for `kwok --config`.
    stages="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
    for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
        pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
        echo "---"
        cat "$stages/$stage.yaml"
    done >"$tmp/kwok-stages.yaml"
)
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "built in $((SECONDS - start)) s" >&2
echo "$bin"
