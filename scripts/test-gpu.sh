#!/usr/bin/env bash
# Runs the GPU suite under Bun and Deno on a machine with a CUDA device and
# npm; fails (rather than skips) when no device is found.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
.tools/zig build -Doptimize=ReleaseFast || exit 1
export MTC_REQUIRE_GPU=1 DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
status=0
node_modules/.bin/bun test tests/gpu || status=1
node_modules/.bin/deno test --allow-ffi --allow-env --allow-read --allow-run --v8-flags=--expose-gc tests/gpu || status=1
exit $status
