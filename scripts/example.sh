#!/usr/bin/env bash
# Builds libmtc and runs examples/example.ts under Bun, then under Deno.
# Extra arguments go to the example (e.g. --runs 200).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
.tools/zig build -Doptimize=ReleaseFast
echo "=== Bun"
node_modules/.bin/bun examples/example.ts "$@"
echo
echo "=== Deno"
node_modules/.bin/deno run --allow-ffi --allow-env --allow-read examples/example.ts "$@"
