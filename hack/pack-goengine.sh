#!/usr/bin/env bash
# `npm pack`'s prepack step (after the TypeScript build): puts the Go engine into the package as
# dist/goengine/goengine.wasm, where controller/rendering/goengine/locate.ts looks next to the
# build output. The engine ships built, as WebAssembly: users of the CLI have no Go, and the
# package has no hack/ to build it from; one .wasm runs on every platform Node runs on (a native
# binary would need one build per OS and architecture). Built from the pinned module by
# hack/build-goengine.sh (a no-op when its cache already holds this key; needs Go 1.26 otherwise).
# postpack removes it again, so a checkout's dist/ never keeps an engine older than hack/goengine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
built=$(GOENGINE_WASM_ONLY=1 "$root/hack/build-goengine.sh" | tail -1)
mkdir -p "$root/dist/goengine"
cp "$built/goengine.wasm" "$root/dist/goengine/goengine.wasm.tmp"
mv "$root/dist/goengine/goengine.wasm.tmp" "$root/dist/goengine/goengine.wasm"
echo "pack-goengine: dist/goengine/goengine.wasm from $built ($(stat -c %s "$root/dist/goengine/goengine.wasm") bytes)" >&2
