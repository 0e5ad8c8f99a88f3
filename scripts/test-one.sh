#!/usr/bin/env bash
# Runs one TypeScript test file (or folder) the way `npm test` runs the whole
# suite: against the emulated CUDA driver with two devices, under Bun, Deno,
# or both, with the permissions and flags each test needs.
#   npm run test:one -- FILE... [bun|deno] [--filter TEXT]
#   npm test -- FILE... [bun|deno] [--filter TEXT]      (the same)
set -uo pipefail

usage() {
  cat <<'EOF'
usage: npm run test:one -- FILE... [bun|deno] [--filter TEXT]

Runs the TypeScript test files (or folders) named, under Bun and then Deno,
or under the one runtime named, as `npm test` does: libmtc built, the
emulated CUDA driver (tests/fake_cuda) with two devices, Deno with
--allow-ffi --allow-env --allow-read --allow-run --v8-flags=--expose-gc.

  FILE           e.g. tests/ts/handle.test.ts, tests/ts, tests/gpu/gpu.test.ts
  bun | deno     only this runtime (default: both)
  --filter TEXT  only the tests whose name contains TEXT

Already set MTC_CUDA_DRIVER or FAKE_CUDA_DEVICE_COUNT are kept (on a CUDA
host, MTC_CUDA_DRIVER=libcuda.so.1 runs the tests on the real driver).
The emulated driver's lines for failed calls, which many tests provoke on
purpose, are shown only when a run fails.
EOF
}

# npm runs scripts from the package root; the files are named from where the user was.
from=${INIT_CWD:-$PWD}
root=$(cd "$(dirname "$0")/.." && pwd)
files=()
runtimes=(bun deno)
filter=
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    bun | deno) runtimes=("$1") ;;
    --filter) [ $# -ge 2 ] || { echo "test-one: --filter needs a value" >&2; exit 2; }; filter=$2; shift ;;
    --filter=*) filter=${1#--filter=} ;;
    -*) echo "test-one: unknown option $1" >&2; usage >&2; exit 2 ;;
    *)
      path=$1
      [ "${path#/}" != "$path" ] || path=$from/$path
      [ -e "$path" ] || { echo "test-one: no such file or folder: $1" >&2; exit 2; }
      files+=("./$(realpath --relative-to="$root" "$path")") ;;
  esac
  shift
done
[ ${#files[@]} -gt 0 ] || { usage >&2; exit 2; }

cd "$root"
bash scripts/setup.sh || exit 1
.tools/zig build -Doptimize=ReleaseFast || { echo "test-one: building libmtc failed" >&2; exit 1; }
export DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
[ -t 1 ] || export NO_COLOR=1
export MTC_CUDA_DRIVER=${MTC_CUDA_DRIVER:-$root/zig-out/lib/libfakecuda.so}
export FAKE_CUDA_DEVICE_COUNT=${FAKE_CUDA_DEVICE_COUNT:-2}
driver_log=$(mktemp "${TMPDIR:-/tmp}/mtc-driver.XXXXXX")
trap 'rm -f "$driver_log"' EXIT
export FAKE_CUDA_LOG=$driver_log

echo "test-one: ${files[*]} under ${runtimes[*]}; CUDA driver: $MTC_CUDA_DRIVER"
status=0
for runtime in "${runtimes[@]}"; do
  echo
  echo "=== $runtime"
  case $runtime in
    bun) cmd=(node_modules/.bin/bun test ${filter:+--test-name-pattern "$filter"} "${files[@]}") ;;
    deno) cmd=(node_modules/.bin/deno test --allow-ffi --allow-env --allow-read --allow-run --v8-flags=--expose-gc
      ${filter:+--filter "$filter"} "${files[@]}") ;;
  esac
  : >"$driver_log"
  if ! "${cmd[@]}"; then
    status=1
    if [ -s "$driver_log" ]; then
      echo "--- the emulated driver's lines for failed calls during this run (last 100 of $(wc -l <"$driver_log")):"
      tail -n 100 "$driver_log"
    fi
  fi
done
exit $status
