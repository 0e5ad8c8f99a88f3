#!/usr/bin/env bash
# The linux-arm64 build (Grace Hopper hosts) on this x86-64 machine, under
# qemu-aarch64: the C tests (`zig build test` for aarch64-linux-gnu,
# ReleaseSafe: the host-path copies, and the device paths against an
# aarch64 build of the emulated driver), then the C example against libmtc.so
# built as the npm package's linux-arm64 one (aarch64-linux-gnu.2.28,
# ReleaseFast, -Dstrip), on the host path and on the emulated driver
# (MTC_CUDA_DRIVER=emulated). No GPU is involved: the arm64 build's GPU path
# has not run on a GPU.
#
# The test programs dlopen the emulated driver, so they link glibc
# dynamically and need an aarch64 glibc as well as qemu: Debian's qemu-user
# and libc6-arm64-cross (in /usr/aarch64-linux-gnu), which this installs with
# apt-get when run as root (as CI is). Where they are missing and cannot be
# installed (not root, no apt-get, apt-get fails), on an arm64 machine (where
# the other suites run the arm64 build natively), or with MTC_TEST_ARM64=0, it
# prints one line saying why it skipped and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."

ZIG=.tools/zig
SYSROOT=/usr/aarch64-linux-gnu
PACKAGES="qemu-user libc6-arm64-cross"
skip() { echo "linux-arm64 suite skipped: $*"; exit 0; }
fail() { echo "linux-arm64 suite: FAIL: $*"; exit 1; }

[ "${MTC_TEST_ARM64:-1}" != 0 ] || skip "MTC_TEST_ARM64=0"
case $(uname -m) in
  x86_64) ;;
  aarch64) skip "this machine is aarch64, where the other suites run the arm64 build natively" ;;
  *) skip "it runs the aarch64 build under qemu from x86-64 only, and this machine is $(uname -m)" ;;
esac

have_qemu() { command -v qemu-aarch64 >/dev/null && [ -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ]; }
if ! have_qemu; then
  missing="qemu-aarch64 or an aarch64 glibc in $SYSROOT is missing"
  [ "$(id -u)" = 0 ] || skip "$missing, and only root can install them (apt-get install $PACKAGES)"
  command -v apt-get >/dev/null || skip "$missing, and there is no apt-get to install them (Debian's $PACKAGES)"
  echo "linux-arm64: installing $PACKAGES with apt-get" >&2
  log=$(mktemp "${TMPDIR:-/tmp}/mtc-apt.XXXXXX")
  # shellcheck disable=SC2086 # the package names, one word each
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES >>"$log" 2>&1; }
  # A fresh machine may have no package lists yet.
  if ! apt_install && ! { apt-get update -q >>"$log" 2>&1 && apt_install; }; then
    why=$(grep -m1 '^E:' "$log" || tail -n 1 "$log")
    rm -f "$log"
    skip "$missing, and apt-get install $PACKAGES failed: $why"
  fi
  rm -f "$log"
  have_qemu || skip "$missing even after apt-get install $PACKAGES"
fi
[ -x "$ZIG" ] || bash scripts/setup.sh || fail "scripts/setup.sh"

echo "--- C tests for aarch64-linux-gnu (ReleaseSafe) under $(qemu-aarch64 --version | head -n 1)"
# -fqemu runs each test program as `qemu-aarch64 -L /usr/aarch64-linux-gnu PROGRAM`.
"$ZIG" build test -Dtarget=aarch64-linux-gnu -Doptimize=ReleaseSafe -fqemu --libc-runtimes "$(dirname "$SYSROOT")" ||
  fail "zig build test for aarch64-linux-gnu under qemu-aarch64"

echo "--- the C example (examples/c/copy_batch.c) against libmtc.so built as the package's linux-arm64 one"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/mtc-arm64.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
"$ZIG" build examples -Dtarget=aarch64-linux-gnu.2.28 -Doptimize=ReleaseFast -Dstrip=true --prefix "$OUT" ||
  fail "zig build examples for aarch64-linux-gnu.2.28"
# LD_LIBRARY_PATH (for the program only: qemu's -E) picks $OUT/lib/libmtc.so over
# zig's cache, which the RUNPATH names first; MTC_CUDA_DRIVER=emulated finds the
# libfakecuda.so beside it, as it finds the package's libcuda-emulated.so.
for driver in none emulated; do
  if [ "$driver" = none ]; then want="on cpu"; driver_env=(-u MTC_CUDA_DRIVER); else want="on cuda:0"; driver_env=(MTC_CUDA_DRIVER=emulated FAKE_CUDA_DEVICE_COUNT=2); fi
  out=$(env "${driver_env[@]}" qemu-aarch64 -L "$SYSROOT" -E LD_LIBRARY_PATH="$OUT/lib" "$OUT/bin/copy_batch" 2>&1) || { echo "$out"; fail "copy_batch (driver: $driver)"; }
  grep -q "copy_batch: ok (.* checked $want)" <<<"$out" || { echo "$out"; fail "copy_batch did not copy $want (driver: $driver)"; }
  echo "driver $driver: $(grep 'copy_batch: ok' <<<"$out")"
done
echo "linux-arm64: the C tests and the C example passed under qemu-aarch64 (no GPU: the GPU path has not run on a GPU)"
