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

key=$( { go env GOVERSION GOOS GOARCH; cat "$tools"/*/go.mod "$tools"/*/go.sum "$tools"/gitserver/*.go "$tools"/csctl-push/*.go "$tools"/htpasswd/*.go "$0"; } | sha256sum | cut -c1-16)
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

build() { # module-dir (under hack/tools, or absolute) output package [extra ldflags]
  local dir=$1 out=$2 pkg=$3 extra=${4:-}
  if [ -x "$bin/$out" ]; then return; fi
  [[ $dir == /* ]] || dir="$tools/$dir"
  echo "build-testenv: building $out ($pkg)" >&2
  local start=$SECONDS
  (cd "$dir" && go build -trimpath -ldflags "$ldflags_common $extra" -o "$bin/$out.tmp" "$pkg")
  mv "$bin/$out.tmp" "$bin/$out"
  echo "build-testenv: built $out in $((SECONDS - start))s" >&2
}

# The flux CLI's cmd/flux embeds install manifests generated at Flux's release time, absent
# from the module: build it from a writable copy of the module (with its own go.mod/go.sum)
# holding a placeholder there. `flux install`/`bootstrap` from this build are not usable;
# get, tree, reconcile, suspend, resume, events and trace do not read the manifests.
flux_cli_source() {
  local version dir src
  version=$(cd "$tools/flux-cli" && go list -m -f '{{.Version}}' github.com/fluxcd/flux2/v2)
  src="$cache_root/src/flux2-$version"
  if [ ! -f "$src/.stackflux-ready" ]; then
    (cd "$tools/flux-cli" && go mod download github.com/fluxcd/flux2/v2)
    dir=$(cd "$tools/flux-cli" && go list -m -f '{{.Dir}}' github.com/fluxcd/flux2/v2)
    rm -rf "$src" && mkdir -p "$(dirname "$src")"
    cp -r "$dir" "$src" && chmod -R u+w "$src"
    mkdir -p "$src/cmd/flux/manifests"
    printf '# Placeholder: stackflux test environment build, no install manifests.\n' \
      > "$src/cmd/flux/manifests/placeholder.yaml"
    touch "$src/.stackflux-ready"
  fi
  echo "$src"
}

build gitserver gitserver .
build etcd etcd go.etcd.io/etcd/server/v3
build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$stamp"
build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$stamp"
build flux source-controller github.com/fluxcd/source-controller
build flux kustomize-controller github.com/fluxcd/kustomize-controller
build helm-controller helm-controller github.com/fluxcd/helm-controller
build kubernetes kubectl k8s.io/kubernetes/cmd/kubectl "$stamp"
build registry registry github.com/distribution/distribution/v3/cmd/registry
# Test helpers for the registry: csctl-push publishes as csctl does, htpasswd makes bcrypt lines.
build csctl-push csctl-push .
build htpasswd htpasswd .
flux_version=$(cd "$tools/flux-cli" && go list -m -f '{{.Version}}' github.com/fluxcd/flux2/v2)
build "$(flux_cli_source)" flux ./cmd/flux "-X main.VERSION=${flux_version#v}"

# CRDs are applied from the module cache; record where they are so `up` needs no Go.
{
  (cd "$tools/flux" && go list -m -f 'FLUX_SOURCE_CRDS={{.Dir}}/config/crd/bases' github.com/fluxcd/source-controller)
  (cd "$tools/flux" && go list -m -f 'FLUX_KUSTOMIZE_CRDS={{.Dir}}/config/crd/bases' github.com/fluxcd/kustomize-controller)
  (cd "$tools/helm-controller" && go list -m -f 'FLUX_HELM_CRDS={{.Dir}}/config/crd/bases' github.com/fluxcd/helm-controller)
  # Cluster API v1.14 moved the core CRDs from config/ to core/config/.
  capi=$(cd "$tools/crds" && go mod download sigs.k8s.io/cluster-api && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
  if [ -d "$capi/core/config/crd/bases" ]; then echo "CAPI_CRDS=$capi/core/config/crd/bases"; else echo "CAPI_CRDS=$capi/config/crd/bases"; fi
  echo "KUBERNETES_VERSION=$k8s_version"
  (cd "$tools/etcd" && go list -m -f 'ETCD_VERSION={{.Version}}' go.etcd.io/etcd/server/v3)
  (cd "$tools/flux" && go list -m -f 'SOURCE_CONTROLLER_VERSION={{.Version}}' github.com/fluxcd/source-controller)
  (cd "$tools/flux" && go list -m -f 'KUSTOMIZE_CONTROLLER_VERSION={{.Version}}' github.com/fluxcd/kustomize-controller)
  (cd "$tools/helm-controller" && go list -m -f 'HELM_CONTROLLER_VERSION={{.Version}}' github.com/fluxcd/helm-controller)
  echo "FLUX_VERSION=$flux_version"
  (cd "$tools/registry" && go list -m -f 'REGISTRY_VERSION={{.Version}}' github.com/distribution/distribution/v3)
  (cd "$tools/crds" && go list -m -f 'CLUSTER_API_VERSION={{.Version}}' sigs.k8s.io/cluster-api)
} > "$bin/paths.env"
touch "$bin/.complete"
echo "$bin"
