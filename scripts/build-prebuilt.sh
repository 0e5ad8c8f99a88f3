#!/usr/bin/env bash
# Builds what the npm package ships in prebuilt/ (`npm run build:prebuilt`,
# which `npm pack` runs): for each platform, libmtc.so and the emulated CUDA
# driver (libcuda-emulated.so), for glibc 2.28 or newer, with -Dstrip (no
# debug info, no path of this machine). linux-arm64 (Grace Hopper hosts) is
# cross-built by Zig on any machine; the CUDA kernels it embeds are the same
# fatbin as linux-x64's (GPU code, whatever the host CPU), compiled by nvcc
# once and reused from zig's cache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

for platform in linux-x64:x86_64 linux-arm64:aarch64; do
  folder=${platform%%:*}
  install=prebuilt/.install/$folder
  rm -rf "$install"
  .tools/zig build -Doptimize=ReleaseFast -Dtarget="${platform#*:}-linux-gnu.2.28" -Dstrip=true --prefix "$install"
  mkdir -p "prebuilt/$folder"
  cp "$install/lib/libmtc.so" "prebuilt/$folder/libmtc.so"
  cp "$install/lib/libfakecuda.so" "prebuilt/$folder/libcuda-emulated.so"
done
