#!/usr/bin/env bash
# The GPU host's sanitizer mode: `bash scripts/gpu-host.sh bun|deno sanitize
# [options]` runs this (docs/VERIFICATION.md). Under compute-sanitizer:
#   c      the C tests of .carry/lib against the real driver, under memcheck;
#   race   the kernels' tests under racecheck: test_kernels, test_into and
#          test_device, and the tests/gpu files that launch the gather,
#          scatter and user kernels, in the runtime named;
#   suite  the GPU suite (tests/gpu), file by file, under memcheck.
# Each run prints one line from scripts/sanitizer_log.ts: errors counted,
# expected API errors ignored (scripts/sanitizer-allow.txt), hazards. The
# sanitizer's full log and the tests' output of every run go to $OUT (else
# ./gpu-logs). Exit: 0 all clean; 1 a run failed; 2 cannot start; 3 nothing
# failed but runs were skipped for time.
#
#   bash scripts/gpu-sanitize.sh bun|deno [--only PARTS] [--skip PARTS]
#     [--budget SECONDS] [--files "tests/gpu/a.test.ts ..."]
#     [--race-files "..."] [--leak-check] [--selftest]
# PARTS: comma-separated c, race, suite (default all, in that order).
# --budget: seconds for all runs (default 500); a run gets what is left, at
# most its part's cap, and one that would start with less than 30 s left is
# skipped, saying so. --leak-check: memcheck's leak check on the C tests.
# --selftest: only check the log parser on its sample logs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
runtime=${1:-}
case $runtime in bun | deno) shift ;; *) echo "usage: gpu-sanitize.sh bun|deno [options] (see the comment at its top)"; exit 2 ;; esac
parts=c,race,suite
skip=
budget=500
suite_files=()
race_files=(tests/gpu/copy_into.test.ts tests/gpu/copy_into_rules.test.ts tests/gpu/kernels.test.ts tests/gpu/launch_lifetime.test.ts)
race_c=(test_kernels test_into test_into_rules test_device)
leak=no
selftest_only=no
while [ $# -gt 0 ]; do
  case $1 in
    --only) parts=$2; shift ;;
    --skip) skip=$2; shift ;;
    --budget) budget=$2; shift ;;
    --files) read -r -a suite_files <<<"$2"; shift ;;
    --race-files) read -r -a race_files <<<"$2"; shift ;;
    --leak-check) leak=full ;;
    --selftest) selftest_only=yes ;;
    *) echo "gpu-sanitize.sh: unknown option $1"; exit 2 ;;
  esac
  shift
done
for p in ${parts//,/ } ${skip//,/ }; do
  case $p in c | race | suite) ;; *) echo "gpu-sanitize.sh: no part \"$p\" (c, race, suite)"; exit 2 ;; esac
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-sanitize.sh: --budget wants seconds, not \"$budget\""; exit 2; }
logs=${OUT:-$PWD/gpu-logs}
mkdir -p "$logs"
export MTC_LIBRARY_PATH=${MTC_LIBRARY_PATH:-$PWD/.carry/lib/libmtc.so} MTC_REQUIRE_GPU=1 DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
# Fewer rounds and no timings in the C kernel tests; Bun's per-test limit
# raised for the sanitizer's slowdown (Deno has none).
export MTC_TEST_QUICK=1 MTC_GPU_TEST_TIMEOUT_MS=${MTC_GPU_TEST_TIMEOUT_MS:-600000}

bin=/tmp/mtc-runtime/$runtime
if [ ! -x "$bin" ]; then
  mkdir -p /tmp/mtc-runtime
  if ! xz -dc ".carry/$runtime.xz" >"$bin" || ! chmod +x "$bin"; then echo "cannot unpack .carry/$runtime.xz"; exit 2; fi
fi
case $runtime in
  bun) parse=("$bin" scripts/sanitizer_log.ts) test_cmd=("$bin" test) ;;
  deno)
    parse=("$bin" run --allow-read scripts/sanitizer_log.ts)
    # No type check: it would only slow the run down under the sanitizer.
    test_cmd=("$bin" test --no-check --allow-ffi --allow-env --allow-read --allow-run --v8-flags=--expose-gc) ;;
esac
"${parse[@]}" --selftest || { echo "gpu-sanitize.sh: the log parser fails its self-test"; exit 2; }
[ $selftest_only = no ] || exit 0
[ -f "$MTC_LIBRARY_PATH" ] || { echo "gpu-sanitize.sh: no $MTC_LIBRARY_PATH: run scripts/pack-for-gpu-host.sh and carry .carry/lib"; exit 2; }

# The toolkit's compute-sanitizer: $COMPUTE_SANITIZER, the PATH, the usual
# places of CUDA 13 (newest first), or beside nvcc.
find_sanitizer() {
  local c versions candidates=("${COMPUTE_SANITIZER:-}" "$(command -v compute-sanitizer 2>/dev/null)")
  mapfile -t versions < <(printf '%s\n' /usr/local/cuda-[0-9]* | grep -v '\*' | sort -rV)
  for c in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda "${versions[@]}"; do
    [ -n "$c" ] && candidates+=("$c/bin/compute-sanitizer" "$c/compute-sanitizer/compute-sanitizer")
  done
  command -v nvcc >/dev/null 2>&1 && candidates+=("$(dirname "$(readlink -f "$(command -v nvcc)")")/compute-sanitizer")
  for c in "${candidates[@]}"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}
sanitizer=$(find_sanitizer) || {
  echo "gpu-sanitize.sh: no compute-sanitizer (looked at \$COMPUTE_SANITIZER, PATH, \$CUDA_HOME, /usr/local/cuda*/bin, beside nvcc)"
  exit 2
}
echo "sanitizer: $sanitizer ($("$sanitizer" --version 2>&1 | grep -i version | head -1)); runtime: $runtime $("$bin" --version | head -1 | sed "s/^$runtime //"); parts: $parts${skip:+ less $skip}; budget: ${budget}s; logs: $logs"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# Every process the tests start is tracked (the GPU suite runs children);
# one that never uses CUDA is not an error; exit codes are judged here, not
# by the tool; every error is printed (up to a bound) so that the parser
# can tell the expected ones from the rest.
common=(--target-processes all --require-cuda-init no --check-exit-code no --launch-timeout 180
  --print-limit 10000 --num-callers-host 16)
deadline=$((SECONDS + budget))
passed=() failed=() skipped=()

run() { # run TOOL NAME CAP COMMAND...: one run under the sanitizer, judged
  local tool=$1 name=$2 cap=$3
  shift 3
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 30 ]; then
    echo "sanitize $tool:$name: skipped (${left}s of the budget left)"
    skipped+=("$tool:$name")
    return
  fi
  local limit=$((cap < left ? cap : left)) slug=${tool}-${name//\//_}
  local log=$logs/sanitize-$slug.log out=$logs/sanitize-$slug.out.log
  local extra=()
  if [ "$tool" = memcheck ]; then
    # Leak checking only where asked, and only for the C tests: a runtime keeps
    # the library's pools until it exits.
    extra=(--report-api-errors explicit --leak-check "$([[ $name == c/* ]] && echo "$leak" || echo no)")
  fi
  rm -f "$log"
  local start=$SECONDS
  timeout -k 20 "$limit" "$sanitizer" --tool "$tool" "${common[@]}" "${extra[@]}" --log-file "$log" "$@" >"$out" 2>&1
  local rc=$? timed=()
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then timed=(--timed-out); fi
  if "${parse[@]}" --tool "$tool" --run "$tool:$name" --exit "$rc" --seconds $((SECONDS - start)) "${timed[@]}" "$log"; then
    passed+=("$tool:$name")
  else
    failed+=("$tool:$name")
    echo "--- last lines of $out:"
    tail -15 "$out"
  fi
}

c_test() { # c_test NAME: sets cmd to the binary and its argument, as gpu-host.sh runs it
  cmd=(".carry/lib/$1")
  [ "$1" = test_kernels ] || cmd+=(libcuda.so.1)
}

has_part() { [[ ",$parts," == *",$1,"* && ",$skip," != *",$1,"* ]]; }

if has_part c; then
  echo "=== C tests against the real driver, memcheck"
  for t in .carry/lib/test_*; do
    [ -x "$t" ] || { echo "no C tests in .carry/lib: run scripts/pack-for-gpu-host.sh"; failed+=(c); break; }
    name=$(basename "$t")
    c_test "$name"
    run memcheck "c/$name" 120 "${cmd[@]}"
  done
fi
if has_part race; then
  echo "=== the kernels' tests, racecheck"
  for name in "${race_c[@]}"; do
    [ -x ".carry/lib/$name" ] || continue
    c_test "$name"
    run racecheck "c/$name" 150 "${cmd[@]}"
  done
  for f in "${race_files[@]}"; do
    run racecheck "gpu/$(basename "$f")" 240 "${test_cmd[@]}" "./$f"
  done
fi
if has_part suite; then
  echo "=== GPU suite ($runtime), memcheck"
  if [ ${#suite_files[@]} -eq 0 ]; then
    # The files with many child processes (each attached to by the tool) last.
    for f in tests/gpu/*.test.ts; do
      case $f in */faults.test.ts | */reliability.test.ts) ;; *) suite_files+=("$f") ;; esac
    done
    suite_files+=(tests/gpu/faults.test.ts tests/gpu/reliability.test.ts)
  fi
  for f in "${suite_files[@]}"; do
    run memcheck "gpu/$(basename "$f")" 300 "${test_cmd[@]}" "./$f"
  done
fi

[ $((${#passed[@]} + ${#failed[@]} + ${#skipped[@]})) -gt 0 ] || { echo "gpu-sanitize.sh: nothing to run"; exit 2; }
verdict=ok code=0
if [ ${#failed[@]} -gt 0 ]; then verdict=FAILED code=1; elif [ ${#skipped[@]} -gt 0 ]; then verdict=INCOMPLETE code=3; fi
echo "gpu-sanitize.sh $runtime: ${#passed[@]} runs clean, ${#failed[@]} failed${failed[*]:+ (${failed[*]})}," \
  "${#skipped[@]} skipped for time${skipped[*]:+ (${skipped[*]})}: $verdict"
exit $code
