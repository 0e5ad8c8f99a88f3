#!/usr/bin/env bash
# Runs the GPU suite, the examples and the example-batch timing on a CUDA host
# that has neither node nor zig: the library and one runtime come prebuilt in
# .carry/ (made by scripts/pack-for-gpu-host.sh). Usage:
#   bash scripts/gpu-host.sh bun|deno [timing runs] [bench]
#   bash scripts/gpu-host.sh bun|deno sanitize [options]   (scripts/gpu-sanitize.sh)
# Logs go to $OUT when it is set, else to ./gpu-logs.
set -uo pipefail
cd "$(dirname "$0")/.."
runtime=${1:?usage: gpu-host.sh bun|deno [runs] [bench] | gpu-host.sh bun|deno sanitize [options]}
[ "${2:-}" != sanitize ] || exec bash scripts/gpu-sanitize.sh "$runtime" "${@:3}"
runs=${2:-300}
with_bench=${3:-}
logs=${OUT:-$PWD/gpu-logs}
mkdir -p "$logs"
export MTC_LIBRARY_PATH="$PWD/.carry/lib/libmtc.so" MTC_REQUIRE_GPU=1 DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
bin=/tmp/mtc-runtime/$runtime
if [ ! -x "$bin" ]; then
  mkdir -p /tmp/mtc-runtime
  xz -dc ".carry/$runtime.xz" > "$bin" && chmod +x "$bin" || { echo "cannot unpack .carry/$runtime.xz"; exit 1; }
fi
echo "runtime: $("$bin" --version | head -1); library: $MTC_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

status=0
case $runtime in
  bun)
    test_cmd=("$bin" test tests/gpu)
    run_cmd=("$bin") ;;
  deno)
    test_cmd=("$bin" test --allow-ffi --allow-env --allow-read --allow-run --v8-flags=--expose-gc tests/gpu)
    run_cmd=("$bin" run --allow-ffi --allow-env --allow-read) ;;
  *) echo "unknown runtime $runtime"; exit 2 ;;
esac
echo "=== C tests against the real driver"
# test_device, test_streams, test_dlpack, test_staging, test_strided, test_into, test_into_rules, test_into_peer, test_prepared, test_prepared_rules and test_prepared_tables (among others) take the driver to load;
# test_kernels, run with no argument, checks the real kernels.
for t in "test_device libcuda.so.1" "test_streams libcuda.so.1" "test_dlpack libcuda.so.1" "test_staging libcuda.so.1" "test_strided libcuda.so.1" "test_into libcuda.so.1" "test_into_rules libcuda.so.1" "test_into_peer libcuda.so.1" "test_pinned_direct libcuda.so.1" "test_threads libcuda.so.1" "test_owner_threads libcuda.so.1" "test_prepared libcuda.so.1" "test_prepared_rules libcuda.so.1" "test_prepared_tables libcuda.so.1" "test_kernels"; do
  set -- $t
  if [ -x ".carry/lib/$1" ]; then
    ".carry/lib/$1" ${2:-} > "$logs/c-$1.log" 2>&1 && tail -1 "$logs/c-$1.log" || { status=1; tail -20 "$logs/c-$1.log"; }
  fi
done
echo "=== C example against the real driver (examples/c/copy_batch.c)"
if [ -x .carry/lib/copy_batch ]; then
  .carry/lib/copy_batch 2>&1 | tee "$logs/c-example.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo ".carry/lib/copy_batch is missing: rerun scripts/pack-for-gpu-host.sh"; status=1
fi
echo "=== Python example: ctypes, DLPack to torch (examples/python/copy_batch.py)"
if python3 -c "import numpy" 2>/dev/null; then
  python3 examples/python/copy_batch.py 2>&1 | tee "$logs/python-example.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "not run: this host has no python3 with NumPy"
fi
echo "=== GPU suite ($runtime)"
"${test_cmd[@]}" 2>&1 | tee "$logs/gpu-suite-$runtime.log" || status=1
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "=== example ($runtime)"
"${run_cmd[@]}" examples/example.ts 2>&1 | tee "$logs/example-$runtime.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "=== kernel example ($runtime)"
"${run_cmd[@]}" examples/kernel.ts 2>&1 | tee "$logs/kernel-example-$runtime.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "=== loader example ($runtime)"
"${run_cmd[@]}" examples/loader.ts 2>&1 | tee "$logs/loader-example-$runtime.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "=== example timing, $runs runs ($runtime)"
"${run_cmd[@]}" examples/example.ts --runs "$runs" --quiet 2>&1 | tee "$logs/timing-$runtime.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if [ "$with_bench" = bench ]; then
  echo "=== benchmarks ($runtime)"
  case $runtime in
    bun) "$bin" bench/bench.ts --pools --json "$logs/bench-$runtime.json" ;;
    deno) "$bin" run --allow-ffi --allow-env --allow-read --allow-write bench/bench.ts --pools --json "$logs/bench-$runtime.json" ;;
  esac 2>&1 | tee "$logs/bench-$runtime.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  echo "=== S1 breakdown ($runtime)"
  "${run_cmd[@]}" bench/breakdown.ts 2>&1 | tee "$logs/breakdown-$runtime.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  if [ -x .carry/lib/plan_bench ]; then
    echo "=== the C library alone (plan_bench)"
    .carry/lib/plan_bench 1000 2>&1 | tee "$logs/plan_bench.log" || status=1
  fi
  if [ -x .carry/lib/graph_bench ]; then
    echo "=== CUDA graph replay against direct enqueue (graph_bench)"
    .carry/lib/graph_bench 2000 2>&1 | tee "$logs/graph_bench.log" || status=1
  fi
fi
echo "gpu-host.sh $runtime: $([ $status -eq 0 ] && echo ok || echo FAILED)"
exit $status
