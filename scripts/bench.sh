#!/usr/bin/env bash
# Builds libmtc and runs the benchmarks (bench/bench.ts) under Bun, then Deno.
# Needs a CUDA device. Extra arguments go to bench.ts (e.g. --runs 500 --only S1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
.tools/zig build -Doptimize=ReleaseFast
echo "=== Bun"
node_modules/.bin/bun bench/bench.ts "$@"
echo
echo "=== Deno"
node_modules/.bin/deno run --allow-ffi --allow-env --allow-read --allow-write bench/bench.ts "$@"
