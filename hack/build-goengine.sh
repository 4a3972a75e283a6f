#!/usr/bin/env bash
# Builds the Go reference implementations stackflux runs (hack/goengine: beside, not under,
# hack/tools, whose modules key the test environment's binaries) and caches them
# outside the repository, keyed by the module's pins and sources:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/stackflux/goengine/<key>/
#     goengine.wasm    the WASI reactor controller/rendering/goengine/ loads
#     goengine-native  the same operations as a native CLI (JSON on stdin, JSON on stdout)
#     helm             the real helm CLI at the same pin (the differential tests' reference)
# Prints that folder as its last line. A second run with the same key is a no-op.
# GOENGINE_WASM_ONLY=1 builds goengine.wasm alone (the image's builder stage).
# The key is the first 16 hex digits of sha256(go.mod, go.sum, the *.go files in byte order of
# their names, this script), concatenated: controller/rendering/goengine/locate.ts computes the
# same key to find the build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src="$here/goengine"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/stackflux/goengine"

command -v go >/dev/null || { echo "build-goengine: Go is required (go1.26+)" >&2; exit 1; }

key=$(cd "$src" && cat go.mod go.sum $(ls -- *.go | LC_ALL=C sort) "$here/build-goengine.sh" | sha256sum | cut -c1-16)
out="$cache_root/$key"
marker="$out/.complete"
[ "${GOENGINE_WASM_ONLY:-}" != 1 ] || marker="$out/.wasm-complete"
if [ -f "$marker" ] || [ -f "$out/.complete" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
cd "$src"
# The stamps Helm's Makefile gives a release build, so .Capabilities (KubeVersion default,
# HelmVersion) are what a released helm v3.19 reports.
helm_version=$(go list -m -f '{{.Version}}' helm.sh/helm/v3)
client_go=$(go list -m -f '{{.Version}}' k8s.io/client-go)
client_go=${client_go#v}
k8s_major=$((${client_go%%.*} + 1))
k8s_minor=${client_go#*.}; k8s_minor=${k8s_minor%%.*}
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=$k8s_major -X $pkg.k8sVersionMinor=$k8s_minor"
done

build() { # output, then go build arguments
  local name=$1; shift
  local start=$SECONDS
  echo "build-goengine: building $name" >&2
  go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$@"
  mv "$out/$name.tmp" "$out/$name"
  echo "build-goengine: built $name in $((SECONDS - start))s ($(stat -c %s "$out/$name") bytes)" >&2
}
GOOS=wasip1 GOARCH=wasm build goengine.wasm -buildmode=c-shared .
if [ "${GOENGINE_WASM_ONLY:-}" != 1 ]; then
  build goengine-native .
  build helm helm.sh/helm/v3/cmd/helm
fi
touch "$marker"
echo "$out"
