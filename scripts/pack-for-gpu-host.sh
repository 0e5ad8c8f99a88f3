#!/usr/bin/env bash
# Prepares .carry/ (git-ignored) for a CUDA host without node or zig:
# a ReleaseFast libmtc.so and xz-compressed bun and deno binaries.
# Carry .carry/lib and ONE of .carry/bun.xz / .carry/deno.xz per call.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.tools/zig build -Doptimize=ReleaseFast
mkdir -p .carry/lib
cp zig-out/lib/libmtc.so .carry/lib/
[ -f .carry/bun.xz ] || xz -T0 -6 -c node_modules/bun/bin/bun.exe > .carry/bun.xz
[ -f .carry/deno.xz ] || xz -T0 -6 -c node_modules/@deno/linux-x64-glibc/deno > .carry/deno.xz
ls -la .carry .carry/lib
