#!/usr/bin/env bash
# Runs a soak without npm: bench/soak_into.ts (copyInto in six directions,
# the default) or bench/soak.ts (startCopy: `copy`), under Deno (default) or
# Bun, on the emulated CUDA driver with two devices, or with --gpu on the
# machine's own driver. Other arguments go to the soak (--copies N, --mode M,
# --samples K, ...: see the script's --help).
#   bash scripts/soak.sh [deno|bun] [into|copy] [--gpu] [soak options]
# The runtime is $DENO or $BUN, else the one on PATH, else node_modules/.bin's.
# libmtc and the emulated driver are built with zig (.tools/zig, else zig on
# PATH) when there is one, else taken as they are in zig-out/lib;
# MTC_LIBRARY_PATH, when set, names the library to use instead.
set -euo pipefail
cd "$(dirname "$0")/.."
runtime=deno soak=bench/soak_into.ts gpu=no args=()
for a in "$@"; do
  case $a in
    deno | bun) runtime=$a ;;
    into) soak=bench/soak_into.ts ;;
    copy) soak=bench/soak.ts ;;
    --gpu) gpu=yes ;;
    *) args+=("$a") ;;
  esac
done

find_tool() { # find_tool NAME OVERRIDE: the override, NAME on PATH, or node_modules/.bin/NAME
  if [ -n "$2" ]; then echo "$2"; elif command -v "$1" >/dev/null 2>&1; then command -v "$1"; else echo "node_modules/.bin/$1"; fi
}
if [ "$runtime" = deno ]; then
  cmd=("$(find_tool deno "${DENO:-}")" run --allow-ffi --allow-env --allow-read --v8-flags=--expose-gc)
else
  cmd=("$(find_tool bun "${BUN:-}")")
fi
[ -x "${cmd[0]}" ] || command -v "${cmd[0]}" >/dev/null || { echo "soak.sh: no $runtime (set ${runtime^^} to its path)"; exit 2; }

zig=$(find_tool zig "$([ -x .tools/zig ] && echo .tools/zig)")
if [ -x "$zig" ] || command -v "$zig" >/dev/null 2>&1; then
  "$zig" build -Doptimize=ReleaseFast
elif [ ! -f zig-out/lib/libmtc.so ]; then
  echo "soak.sh: no zig to build libmtc, and no zig-out/lib/libmtc.so"
  exit 2
fi
export DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
if [ $gpu = no ]; then
  export MTC_CUDA_DRIVER=$PWD/zig-out/lib/libfakecuda.so FAKE_CUDA_DEVICE_COUNT=${FAKE_CUDA_DEVICE_COUNT:-2}
  [ -f "$MTC_CUDA_DRIVER" ] || { echo "soak.sh: no emulated driver at $MTC_CUDA_DRIVER"; exit 2; }
fi
echo "soak.sh: ${cmd[*]} $soak ${args[*]}${MTC_CUDA_DRIVER:+ (emulated driver, $FAKE_CUDA_DEVICE_COUNT devices)}"
exec "${cmd[@]}" "$soak" "${args[@]}"
