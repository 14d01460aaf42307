#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller, the real ones, from their upstream
# Go modules pinned in tests/cluster/flux/{source,kustomize}/go.mod (wrapper modules that
# require each controller and its published `api` module and repeat its non-local `replace`
# pins; nothing upstream is copied into this repository), and copies their CRDs out of the
# module zips into bin/crds (source-controller watches every source kind, so all of them).
#
# Cached like the control plane (tests/cluster/build.sh), by a key over the module files and
# this script, under ${BERTH_CLUSTER_CACHE:-$HOME/.cache/berth/cluster}/flux-<key>/bin.
# Prints the bin directory on stdout.
#
# Usage: tests/cluster/build-flux.sh          build (or reuse) and print the bin directory
#        tests/cluster/build-flux.sh --key    print the cache key only
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
    echo "error: the Flux end-to-end tests build Flux's controllers from Go modules, and \`go\` is not on PATH" >&2
    echo "help: install Go 1.26 or newer (Debian: \`apt-get install golang\`, or from go.dev) and run again" >&2
    exit 2
fi

key="$(cat "$here/build-flux.sh" "$here"/flux/*/go.mod "$here"/flux/*/go.sum | sha256sum | cut -c1-16)"
if [[ "${1:-}" == "--key" ]]; then
    echo "$key"
    exit 0
fi

cache="${BERTH_CLUSTER_CACHE:-$HOME/.cache/berth/cluster}"
bin="$cache/flux-$key/bin"
complete=1
for file in source-controller kustomize-controller crds/source.toolkit.fluxcd.io_gitrepositories.yaml \
    crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml; do
    [[ -e "$bin/$file" ]] || complete=0
done
if [[ $complete == 1 ]]; then
    echo "$bin"
    exit 0
fi

mkdir -p "$cache/flux-$key"
tmp="$(mktemp -d "$cache/flux-$key/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
echo "building Flux's controllers into $bin" >&2
for controller in source kustomize; do
    (
        cd "$here/flux/$controller"
        module="github.com/fluxcd/$controller-controller"
        echo "  $controller-controller" >&2
        go build -trimpath -ldflags "-s -w" -o "$tmp/$controller-controller" "$module"
        mkdir -p "$tmp/crds"
        cp "$(go list -m -f '{{.Dir}}' "$module")"/config/crd/bases/*.yaml "$tmp/crds/"
    )
done
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "built in $((SECONDS - start)) s" >&2
echo "$bin"
