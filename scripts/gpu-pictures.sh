#!/usr/bin/env bash
# On a CUDA host without node or zig (see scripts/gpu-host.sh): the doctor
# from the installed package, and the traces and pictures of the example
# batch's copy and of four loader workers (docs/TROUBLESHOOTING.md), for one
# runtime. Needs .carry/lib/libmtc.so and .carry/<runtime>.xz
# (scripts/pack-for-gpu-host.sh) and, for the doctor from the package, the
# tarball in .carry/ (`npm pack --pack-destination .carry`). Usage:
#   bash scripts/gpu-pictures.sh bun|deno
# Writes to $OUT when it is set, else to ./gpu-logs: doctor-<runtime>.txt,
# <runtime>-copy.json and .svg, <runtime>-loader.json and .svg.
set -uo pipefail
cd "$(dirname "$0")/.."
runtime=${1:?usage: gpu-pictures.sh bun|deno}
logs=${OUT:-$PWD/gpu-logs}
mkdir -p "$logs"
export DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1
bin=/tmp/mtc-runtime/$runtime
if [ ! -x "$bin" ]; then
  mkdir -p /tmp/mtc-runtime
  xz -dc ".carry/$runtime.xz" >"$bin" && chmod +x "$bin" || { echo "cannot unpack .carry/$runtime.xz"; exit 1; }
fi
case $runtime in
  bun) run=("$bin") ;;
  deno) run=("$bin" run --allow-ffi --allow-env --allow-read) ;;
  *) echo "unknown runtime $runtime"; exit 2 ;;
esac
status=0
# "<what>, Bun 1.x (or deno 2.x ...), <the GPU>".
title() {
  local version gpu
  version=$("$bin" --version | head -1)
  [ "$runtime" = bun ] && version="Bun $version"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  echo "$1, $version, ${gpu:-no nvidia-smi}"
}

tarball=$(ls .carry/multi-tensor-copier-*.tgz 2>/dev/null | head -1)
if [ -n "$tarball" ]; then
  # The package installed as npm would: unpacked into an app's node_modules, its bin linked.
  app=/tmp/mtc-doctor-app
  rm -rf "$app" && mkdir -p "$app/node_modules/.bin"
  tar -xzf "$tarball" -C "$app/node_modules" && mv "$app/node_modules/package" "$app/node_modules/multi-tensor-copier"
  ln -s ../multi-tensor-copier/dist/cli.js "$app/node_modules/.bin/multi-tensor-copier"
  chmod +x "$app/node_modules/multi-tensor-copier/dist/cli.js"
  if [ "$runtime" = bun ]; then
    command=(env PATH="/tmp/mtc-runtime:$PATH" "$bin" x multi-tensor-copier doctor)
    shown="bunx multi-tensor-copier doctor"
  else
    command=("${run[@]}" node_modules/multi-tensor-copier/dist/cli.js doctor)
    shown="deno run --allow-ffi --allow-env --allow-read node_modules/multi-tensor-copier/dist/cli.js doctor"
  fi
  echo "=== the doctor from the package: $shown"
  { echo "\$ $shown"; (cd "$app" && env -u MTC_LIBRARY_PATH "${command[@]}" 2>&1); echo "(exit status $?)"; } | tee "$logs/doctor-$runtime.txt"
  grep -q "^(exit status 0)" "$logs/doctor-$runtime.txt" || status=1
else
  echo "=== no .carry/multi-tensor-copier-*.tgz: the doctor from the clone instead"
  MTC_LIBRARY_PATH="$PWD/.carry/lib/libmtc.so" "${run[@]}" ts/cli.ts doctor 2>&1 | tee "$logs/doctor-$runtime.txt" || status=1
fi

export MTC_LIBRARY_PATH="$PWD/.carry/lib/libmtc.so"
echo "=== the example batch's copy to cuda:0, traced"
MTC_TRACE_FILE="$logs/$runtime-copy.json" "${run[@]}" scripts/trace_example.ts || status=1
python3 scripts/trace_picture.py "$logs/$runtime-copy.json" -o "$logs/$runtime-copy.svg" \
  --title "$(title "The example batch to cuda:0 (one warm copy)")" || status=1
echo "=== four loader workers feeding the main thread, traced"
MTC_TRACE_FILE="$logs/$runtime-loader.json" "${run[@]}" scripts/trace_example.ts --workers 4 || status=1
python3 scripts/trace_picture.py "$logs/$runtime-loader.json" -o "$logs/$runtime-loader.svg" --last-ms "${LOADER_MS:-20}" \
  --title "$(title "Four loader workers feeding the main thread (the last ${LOADER_MS:-20} ms)")" || status=1
ls -la "$logs"
exit $status
