# syntax=docker/dockerfile:1
# stackflux controller image: Node 24 LTS, git (simple-git shells out to it), production
# dependencies only, non-root, read-only root filesystem friendly (writes only to
# /var/cache/stackflux, declared as a volume).

FROM node:24-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the image's own Node 24 runs the build; the `node` dev dependency
# (which provides Node 24 on developer machines) is not needed here.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY controller ./controller
RUN npx tsc -p tsconfig.build.json

# The Go engine (Helm's chart engine, Go templates, Go's YAML parsing) as WebAssembly, built from
# the pinned module by the same script as the test builds; controller/rendering/goengine loads it.
FROM golang:1.26 AS goengine
WORKDIR /src
COPY hack/build-goengine.sh ./hack/
COPY hack/goengine ./hack/goengine
RUN XDG_CACHE_HOME=/cache GOENGINE_WASM_ONLY=1 hack/build-goengine.sh \
 && cp "$(XDG_CACHE_HOME=/cache GOENGINE_WASM_ONLY=1 hack/build-goengine.sh | tail -1)/goengine.wasm" /goengine.wasm

FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts

FROM node:24-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates openssh-client \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY bin ./bin
COPY crds ./crds
COPY flux-templates ./flux-templates
# Where an installed package has it (npm pack's prepack, hack/pack-goengine.sh): next to the build
# output, the path controller/rendering/goengine/locate.ts looks at after STACKFLUX_GO_ENGINE.
COPY --from=goengine /goengine.wasm ./dist/goengine/goengine.wasm
# HOME is not the cache: release trees are written there. git never reads HOME anyway (stackflux
# gives every git process an empty private HOME and no global config, controller/sources/git.ts).
ENV NODE_ENV=production \
    HOME=/tmp \
    STACKFLUX_CACHE_DIR=/var/cache/stackflux
# Two glibc malloc arenas instead of up to 8 per core: Node's threads (libuv pool, V8 platform,
# render workers) otherwise each keep freed native memory in an arena of their own; measured
# 8-10 MB less RSS with the render workers busy. A fixed mmap threshold of 128 KiB: glibc
# otherwise raises it (and the trim threshold with it, up to 64 MiB) after the first large buffer
# is freed, and then keeps a LIST page's or a render message's freed buffers in the heap; measured
# with the semi-space below, 1,000-Cluster fan-out peak 199 -> 171 MB. `npm run bench -- fleet`
# sets both too.
ENV MALLOC_ARENA_MAX=2
ENV MALLOC_MMAP_THRESHOLD_=131072
RUN mkdir -p /var/cache/stackflux && chown 65532:65532 /var/cache/stackflux
VOLUME ["/var/cache/stackflux"]
USER 65532:65532
# --max-semi-space-size=4 (MiB): V8's young generation otherwise grows to 128 MiB under the
# allocation rate of a fan-out (rendering, JSON), which was most of the peak RSS; the data the
# controller keeps lives in the old generation, unchanged. 4 instead of 8 halves the 16 MiB of
# new space a fan-out holds, for about a fifth more CPU in young-generation collections (the
# fan-out is paced by the API rate limit, not by CPU).
# (`stackflux run` itself sets --heap-growing-percent=10 and --optimize-for-size, which V8 reads
# when it collects; the semi-space size is fixed when the heap is set up, so it has to be a flag
# here. --optimize-for-size is not on this line: given here, V8 also sets up a young generation of
# about 2 MB whatever the semi-space flag says.)
# `npm run bench -- fleet` starts stackflux with the node flags of this line.
ENTRYPOINT ["node", "--max-semi-space-size=4", "/app/bin/stackflux.js"]
CMD ["run"]
