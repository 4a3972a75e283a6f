# Sourced by hack/ scripts: sets $NODE to a Node 24 binary — the project's own (the `node`
# devDependency installed by `npm ci`) or a system Node 24.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ -x "$root/node_modules/.bin/node" ]; then
  NODE="$root/node_modules/.bin/node"
elif command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 24 ]; then
  NODE=$(command -v node)
else
  echo "stackflux needs Node 24: run 'npm ci' in $root (installs it as a dev dependency) or put Node 24 on PATH" >&2
  exit 1
fi
