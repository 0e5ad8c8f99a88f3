#!/usr/bin/env bash
# Installs the project's toolchain inside the checkout, so a fresh machine with
# node, npm and python3 needs nothing else: bun, deno, typescript, tsup and
# bun-types from npm (node_modules/), zig from PyPI (.tools/).
set -euo pipefail
cd "$(dirname "$0")/.."

ZIG_VERSION=0.15.2

if [ ! -x node_modules/.bin/bun ] || [ ! -x node_modules/.bin/deno ] ||
   [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm packages (bun, deno, typescript, tsup)" >&2
  # `npm install` rather than `npm ci`: npm 11 leaves other platforms' optional
  # packages (bun's and deno's per-platform binaries) out of the lock file and
  # then `npm ci` refuses that same lock. --no-save keeps the lock file as it is.
  npm install --no-save --no-audit --no-fund --loglevel=error
fi

if [ ! -x ".tools/ziglang-$ZIG_VERSION/ziglang/zig" ]; then
  echo "setup: installing zig $ZIG_VERSION from PyPI" >&2
  rm -rf ".tools/ziglang-$ZIG_VERSION"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target ".tools/ziglang-$ZIG_VERSION" "ziglang==$ZIG_VERSION"
fi
ln -sfn "ziglang-$ZIG_VERSION/ziglang/zig" .tools/zig
