#!/usr/bin/env bash
# Builds the test environment's binaries from the Go modules pinned under hack/tools/ and
# caches them outside the repository, keyed by those pins:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/stackflux/testenv/bin-<key>/
# Prints the bin directory as its last line. A second run with the same pins is a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools="$here/tools"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/stackflux/testenv"

command -v go >/dev/null || { echo "build-testenv: Go is required (go1.26+) to build the test environment" >&2; exit 1; }
command -v git >/dev/null || { echo "build-testenv: git is required" >&2; exit 1; }

key=$( { go env GOVERSION GOOS GOARCH; cat "$tools"/*/go.mod "$tools"/*/go.sum "$tools"/gitserver/*.go "$0"; } | sha256sum | cut -c1-16)
bin="$cache_root/bin-$key"
if [ -f "$bin/.complete" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$bin"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
ldflags_common="-s -w"
k8s_version=$(cd "$tools/kubernetes" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build() { # module-dir output package [extra ldflags]
  local dir=$1 out=$2 pkg=$3 extra=${4:-}
  if [ -x "$bin/$out" ]; then return; fi
  echo "build-testenv: building $out ($pkg)" >&2
  local start=$SECONDS
  (cd "$tools/$dir" && go build -trimpath -ldflags "$ldflags_common $extra" -o "$bin/$out.tmp" "$pkg")
  mv "$bin/$out.tmp" "$bin/$out"
  echo "build-testenv: built $out in $((SECONDS - start))s" >&2
}

build gitserver gitserver .
build etcd etcd go.etcd.io/etcd/server/v3
build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$stamp"
build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$stamp"
build flux source-controller github.com/fluxcd/source-controller
build flux kustomize-controller github.com/fluxcd/kustomize-controller

# CRDs are applied from the module cache; record where they are so `up` needs no Go.
{
  (cd "$tools/flux" && go list -m -f 'FLUX_SOURCE_CRDS={{.Dir}}/config/crd/bases' github.com/fluxcd/source-controller)
  (cd "$tools/flux" && go list -m -f 'FLUX_KUSTOMIZE_CRDS={{.Dir}}/config/crd/bases' github.com/fluxcd/kustomize-controller)
  (cd "$tools/crds" && go mod download sigs.k8s.io/cluster-api && go list -m -f 'CAPI_CRDS={{.Dir}}/config/crd/bases' sigs.k8s.io/cluster-api)
  echo "KUBERNETES_VERSION=$k8s_version"
  (cd "$tools/etcd" && go list -m -f 'ETCD_VERSION={{.Version}}' go.etcd.io/etcd/server/v3)
  (cd "$tools/flux" && go list -m -f 'SOURCE_CONTROLLER_VERSION={{.Version}}' github.com/fluxcd/source-controller)
  (cd "$tools/flux" && go list -m -f 'KUSTOMIZE_CONTROLLER_VERSION={{.Version}}' github.com/fluxcd/kustomize-controller)
  (cd "$tools/crds" && go list -m -f 'CLUSTER_API_VERSION={{.Version}}' sigs.k8s.io/cluster-api)
} > "$bin/paths.env"
touch "$bin/.complete"
echo "$bin"
