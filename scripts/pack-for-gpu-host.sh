#!/usr/bin/env bash
# Prepares .carry/ (git-ignored) for a CUDA host without node or zig:
# a ReleaseFast libmtc.so and xz-compressed bun and deno binaries.
# Carry .carry/lib and ONE of .carry/bun.xz / .carry/deno.xz per call.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
 # A named target means the baseline x86-64 CPU and an old glibc, so the
# library runs on whatever host CPU and distribution the GPU machine has.
.tools/zig build -Doptimize=ReleaseFast -Dtarget=x86_64-linux-gnu.2.28 --prefix .carry/build
# The C tests that also run against the real driver (device paths, streams, kernels).
.tools/zig build gpu-test-bins -Doptimize=ReleaseSafe -Dtarget=x86_64-linux-gnu.2.28 --prefix .carry/build
mkdir -p .carry/lib
cp .carry/build/lib/libmtc.so .carry/build/bin/test_device .carry/build/bin/test_streams .carry/build/bin/test_kernels \
  .carry/build/bin/test_dlpack .carry/build/bin/test_staging .carry/build/bin/test_strided .carry/build/bin/test_into .carry/build/bin/test_into_rules \
  .carry/build/bin/test_into_peer .carry/build/bin/test_pinned_direct .carry/build/bin/test_threads \
  .carry/build/bin/test_owner_threads .carry/build/bin/test_prepared .carry/build/bin/test_prepared_rules .carry/build/bin/test_prepared_tables .carry/lib/
# The C embedding example (examples/c); it finds libmtc.so beside it.
.tools/zig build examples -Doptimize=ReleaseFast -Dtarget=x86_64-linux-gnu.2.28 --prefix .carry/build
cp .carry/build/bin/copy_batch .carry/lib/
# The C library alone, phase by phase (bench/c/plan_bench.c), next to libmtc.so.
.tools/zig cc -target x86_64-linux-gnu.2.28 -O2 -std=c11 -Wall -Wextra -Werror -Ilib/include bench/c/plan_bench.c \
  -L.carry/lib -lmtc -ldl -Wl,-rpath,'$ORIGIN' -o .carry/lib/plan_bench
# CUDA graph replay against direct enqueue (bench/c/graph_bench.c): the driver alone.
.tools/zig cc -target x86_64-linux-gnu.2.28 -O2 -std=c11 -Wall -Wextra -Werror bench/c/graph_bench.c \
  -ldl -o .carry/lib/graph_bench
[ -f .carry/bun.xz ] || xz -T0 -6 -c node_modules/bun/bin/bun.exe > .carry/bun.xz
[ -f .carry/deno.xz ] || xz -T0 -6 -c node_modules/@deno/linux-x64-glibc/deno > .carry/deno.xz
ls -la .carry .carry/lib
