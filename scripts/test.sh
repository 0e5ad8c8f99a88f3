#!/usr/bin/env bash
# Runs every test suite that needs no GPU, and the GPU suite (which skips,
# saying so, where no CUDA device exists). Installs the toolchain first.
# Exits non-zero if any suite fails; the last line counts the suites.
# With arguments, runs only the test files named (scripts/test-one.sh):
#   npm test -- tests/ts/handle.test.ts [bun|deno]
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || exec bash scripts/test-one.sh "$@"
bash scripts/setup.sh || exit 1
export DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
# Colours only on a terminal: a log file should read as text.
[ -t 1 ] || export NO_COLOR=1

ZIG=.tools/zig
BUN=node_modules/.bin/bun
DENO=node_modules/.bin/deno
FAKE="$PWD/zig-out/lib/libfakecuda.so"
DENO_TEST=("$DENO" test --allow-ffi --allow-env --allow-read --allow-run --v8-flags=--expose-gc)
passed=0
failed=()

# The emulated driver prints a line for each call that fails, and many tests
# make calls fail on purpose: each suite's lines go to a file of their own,
# shown only when that suite fails.
DRIVER_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/mtc-driver-logs.XXXXXX")
trap 'rm -rf "$DRIVER_LOGS"' EXIT

suite() { # suite NAME COMMAND...: runs one suite and records the outcome
  local name=$1
  shift
  echo
  echo "=== $name"
  export FAKE_CUDA_LOG="$DRIVER_LOGS/$((passed + ${#failed[@]} + 1)).log"
  if "$@"; then
    passed=$((passed + 1))
  else
    failed+=("$name")
    if [ -s "$FAKE_CUDA_LOG" ]; then
      echo "--- the emulated driver's lines for failed calls during this suite (last 200 of $(wc -l <"$FAKE_CUDA_LOG")):"
      tail -n 200 "$FAKE_CUDA_LOG"
    fi
  fi
  unset FAKE_CUDA_LOG
}

exports_only_mtc() { # the shared library exports mtc_* symbols and nothing else
  local bad
  bad=$(nm -D --defined-only zig-out/lib/libmtc.so | awk '{print $3}' | grep -v '^mtc_' || true)
  if [ -n "$bad" ]; then echo "libmtc.so exports symbols outside mtc_: $bad"; return 1; fi
  echo "libmtc.so exports $(nm -D --defined-only zig-out/lib/libmtc.so | grep -c ' mtc_') mtc_ symbols and nothing else"
}

c_layout() { # lib/src stays the pipeline of a copy (the check proves itself first)
  python3 scripts/check_c_layout.py --selftest && python3 scripts/check_c_layout.py
}

doc_examples() { # the doc comments' examples type-check (the check proves itself first)
  python3 scripts/check_doc_ts.py --selftest && python3 scripts/check_doc_ts.py
}

c_example() { # c_example ENV...: builds examples/c and runs copy_batch under `env ENV...`
  "$ZIG" build examples -Doptimize=ReleaseFast && env "$@" zig-out/bin/copy_batch
}

c_bench() { # bench/c/plan_bench builds and runs every scenario (D1, D2 on two devices) against the emulated driver
  mkdir -p zig-out/bin &&
    "$ZIG" cc -O2 -std=c11 -Wall -Wextra -Werror -Ilib/include bench/c/plan_bench.c -Lzig-out/lib -lmtc -ldl \
      -Wl,-rpath,"$PWD/zig-out/lib" -o zig-out/bin/plan_bench &&
    env MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2 zig-out/bin/plan_bench 3
}

c_graph_bench() { # bench/c/graph_bench builds and runs its direct cases; the emulated driver has no graph calls, which it names
  local out
  mkdir -p zig-out/bin &&
    "$ZIG" cc -O2 -std=c11 -Wall -Wextra -Werror bench/c/graph_bench.c -ldl -o zig-out/bin/graph_bench &&
    out=$(env MTC_CUDA_DRIVER="$FAKE" zig-out/bin/graph_bench 3) && echo "$out" &&
    grep -q '^graph cases not run: .* has no cuStreamBeginCapture_v2$' <<<"$out"
}

python_example() { # python_example ENV...: examples/python/copy_batch.py with NumPy in .tools/python, under `env ENV...`
  bash scripts/setup-numpy.sh && env "$@" PYTHONPATH="$PWD/.tools/python" python3 examples/python/copy_batch.py
}

gpu_suite_here() { # gpu_suite_here bun|deno: the GPU suite on this machine's own driver
  # Where no CUDA device is found (tests/gpu/device_check.ts says why, as the
  # suite will), a run in which every test skipped and none failed is shown as
  # one line; any other outcome (a failure, a test that ran) prints in full.
  local cmd probe reason out rc=0 total= files=
  case $1 in
    bun) cmd=("$BUN" test tests/gpu) probe=("$BUN" tests/gpu/device_check.ts) ;;
    deno) cmd=("${DENO_TEST[@]}" tests/gpu) probe=("$DENO" run --allow-ffi --allow-env --allow-read tests/gpu/device_check.ts) ;;
  esac
  reason=$("${probe[@]}" 2>/dev/null) || reason=
  [ -n "$reason" ] || { "${cmd[@]}"; return; }
  out=$(mktemp "${TMPDIR:-/tmp}/mtc-gpu-suite.XXXXXX")
  "${cmd[@]}" >"$out" 2>&1 || rc=$?
  # The runner's own count: bun " 0 pass", " N skip", " 0 fail", "Ran N tests across F files.";
  # deno "ok | 0 passed | 0 failed | N ignored", after one "running N tests from FILE" a file.
  if [ "$rc" -eq 0 ] && grep -qxE ' 0 pass' "$out" && grep -qxE ' 0 fail' "$out"; then
    total=$(sed -nE 's/^ ([0-9]+) skip$/\1/p' "$out")
    [ "$(sed -nE 's/^Ran ([0-9]+) tests? across.*/\1/p' "$out")" = "$total" ] || total=
    files=$(sed -nE 's/^Ran [0-9]+ tests? across ([0-9]+) files?.*/\1/p' "$out")
  elif [ "$rc" -eq 0 ]; then
    total=$(sed -nE 's/^ok \| 0 passed \| 0 failed \| ([0-9]+) ignored .*/\1/p' "$out")
    files=$(grep -c '^running [0-9]* tests\? from ' "$out")
  fi
  if [ -n "$total" ] && [ "$total" -gt 0 ]; then
    echo "tests/gpu ($1): $total tests skipped in $files files: $reason"
  else
    cat "$out"
  fi
  rm -f "$out"
  return "$rc"
}

suite "C layout: folders in pipeline order, no include or call circle, no upward call, no file above 400 lines" c_layout
suite "build libmtc (ReleaseFast)" "$ZIG" build -Doptimize=ReleaseFast || { echo "build failed"; exit 1; }
suite "C tests (zig build test)" "$ZIG" build test --summary all
suite "C tests under ThreadSanitizer (zig build test -Dtsan)" "$ZIG" build test -Dtsan
suite "C tests under AddressSanitizer + UBSan (zig build test -Dsanitize=address)" "$ZIG" build test -Dsanitize=address
suite "exported symbols" exports_only_mtc
suite "linux-arm64 under qemu-aarch64: the C tests and the C example (skips without qemu: one line)" bash scripts/test-arm64.sh
suite "C example, emulated driver: to cuda:0 (examples/c/copy_batch.c)" c_example MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2
suite "C example, no driver: the host path (examples/c/copy_batch.c)" c_example -u MTC_CUDA_DRIVER
suite "Python example, emulated driver: to cuda:0 and back (examples/python/copy_batch.py)" \
  python_example MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2
suite "Python example, no driver: the host path (examples/python/copy_batch.py)" python_example -u MTC_CUDA_DRIVER
suite "TypeScript layout: no import cycle (dpdm), folders in order, no file above 400 lines" bash scripts/check_ts_layout.sh
suite "type check: tsc with bun-types" node_modules/.bin/tsc -p tsconfig.json --noEmit
suite "type check: deno check" "$DENO" check ts/mod.ts ts/npm.ts ts/worker.ts tests/ts tests/gpu examples bench
suite "lint: deno lint of the library, examples, benchmarks and scripts" "$DENO" lint ts examples bench scripts
suite "type check: the README's TypeScript blocks under bun init's tsconfig (tsc) and deno check" bash scripts/check_readme_ts.sh
suite "type check: the doc comments' TypeScript examples under bun init's tsconfig (tsc) and deno check" doc_examples
suite "the README's benchmark figures are docs/BENCHMARKS.md's (the check proves itself first)" \
  bash -c 'python3 scripts/check_bench_figures.py --selftest && python3 scripts/check_bench_figures.py'
suite "TypeScript tests under Bun (emulated CUDA driver)" env MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2 "$BUN" test tests/ts
suite "TypeScript tests under Deno (emulated CUDA driver)" env MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2 "${DENO_TEST[@]}" tests/ts
suite "GPU suite under Bun, emulated driver" env MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2 MTC_REQUIRE_GPU=1 "$BUN" test tests/gpu
suite "GPU suite under Deno, emulated driver" env MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2 MTC_REQUIRE_GPU=1 "${DENO_TEST[@]}" tests/gpu
suite "benchmark smoke run under Bun (emulated driver: checks that it runs; its figures time host memcpy, not a GPU)" \
  env MTC_CUDA_DRIVER="$FAKE" FAKE_CUDA_DEVICE_COUNT=2 "$BUN" bench/bench.ts --runs 3
suite "C benchmark smoke run (bench/c/plan_bench.c, emulated driver, two devices)" c_bench
suite "C graph benchmark smoke run (bench/c/graph_bench.c, emulated driver: the direct cases)" c_graph_bench
suite "npm package: pack, offline install, Bun and Deno (tests/package/install_test.sh)" bash tests/package/install_test.sh
suite "JSR package: deno publish --dry-run (tests/package/jsr_test.sh)" bash tests/package/jsr_test.sh
suite "docs: deno doc --lint and --html, the README's first example (tests/package/docs_test.sh)" bash tests/package/docs_test.sh
suite "GPU suite under Bun, real driver (skips without a GPU: one line)" gpu_suite_here bun
suite "GPU suite under Deno, real driver (skips without a GPU: one line)" gpu_suite_here deno

echo
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed suite: %s\n' "${failed[@]}"
fi
echo "suites: $passed passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
