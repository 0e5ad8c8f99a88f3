#!/usr/bin/env bash
# Installs the project's toolchain inside the checkout, so a fresh machine with
# node, npm and python3 needs nothing else: bun, deno, typescript, tsup and
# bun-types from npm (node_modules/), zig and CUDA's nvcc from PyPI (.tools/).
# nvcc (for the kernels in cuda/) also needs a host C++ compiler, g++ by
# default; MTC_SETUP_NVCC=0 skips it (then libmtc builds without kernels).
# NumPy, which only the Python example needs, is scripts/setup-numpy.sh's.
# Quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

ZIG_VERSION=0.15.2
# CUDA 13.0's compiler. nvcc itself, cicc (nvidia-nvvm), and the headers a
# kernel-only compile includes (cuda_runtime.h and crt/): four wheels, about
# 101 MB to download (nvcc 37 MB, nvvm 62 MB, runtime 2.2 MB, crt 0.1 MB).
NVCC_VERSION=13.0.88
# The installs go into .tools/, not the system: pip's warning about running
# as root (as CI does) does not apply.
export PIP_ROOT_USER_ACTION=ignore

if [ ! -x node_modules/.bin/bun ] || [ ! -x node_modules/.bin/deno ] ||
   [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages (bun, deno, typescript, tsup)" >&2
  # package-lock.json lists every platform's optional packages (bun's and
  # deno's per-platform binaries among them), so this installs exactly what it
  # pins; --no-save keeps it as it is all the same. Unlike `npm ci`, `npm
  # install` leaves alone what is already in node_modules/. --no-dry-run: under
  # `npm pack --dry-run` (whose prepack builds) npm passes dry-run on to us.
  npm install --no-save --no-dry-run --no-audit --no-fund --loglevel=error
fi

if [ ! -x ".tools/ziglang-$ZIG_VERSION/ziglang/zig" ]; then
  echo "setup: installing zig $ZIG_VERSION from PyPI" >&2
  rm -rf ".tools/ziglang-$ZIG_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target ".tools/ziglang-$ZIG_VERSION" "ziglang==$ZIG_VERSION"
fi
ln -sfn "ziglang-$ZIG_VERSION/ziglang/zig" .tools/zig

if [ "${MTC_SETUP_NVCC:-1}" != "0" ]; then
  NVCC_DIR=".tools/cuda-$NVCC_VERSION"
  if [ ! -x "$NVCC_DIR/nvidia/cu13/bin/nvcc" ] || [ ! -f "$NVCC_DIR/nvidia/cu13/include/cuda_runtime.h" ] ||
     [ ! -f "$NVCC_DIR/nvidia/cu13/include/crt/host_defines.h" ] || [ ! -x "$NVCC_DIR/nvidia/cu13/nvvm/bin/cicc" ]; then
    echo "setup: installing CUDA nvcc $NVCC_VERSION from PyPI (about 101 MB)" >&2
    rm -rf "$NVCC_DIR"
    # --no-deps with every wheel pinned: the nvcc wheel's own requirements are
    # unpinned and would pull the newest releases instead of 13.0's.
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --no-deps \
      --target "$NVCC_DIR" "nvidia-cuda-nvcc==$NVCC_VERSION" "nvidia-nvvm==$NVCC_VERSION" \
      "nvidia-cuda-crt==$NVCC_VERSION" "nvidia-cuda-runtime==$NVCC_VERSION"
  fi
  # A wrapper, not a symlink: nvcc finds its headers and tools relative to
  # the path it was started by.
  if [ ! -x .tools/nvcc ] || ! grep -q "cuda-$NVCC_VERSION/" .tools/nvcc; then
    rm -f .tools/nvcc
    printf '%s\n' '#!/bin/sh' \
      "# CUDA $NVCC_VERSION's nvcc, installed by scripts/setup.sh." \
      "exec \"\$(dirname \"\$0\")/cuda-$NVCC_VERSION/nvidia/cu13/bin/nvcc\" \"\$@\"" >.tools/nvcc
    chmod +x .tools/nvcc
  fi
  if ! command -v g++ >/dev/null 2>&1; then
    echo "setup: warning: no g++ on PATH; nvcc needs a host C++ compiler (build with -Dkernels=false," \
      "or point -Dnvcc-ccbin at one)" >&2
  fi
fi
