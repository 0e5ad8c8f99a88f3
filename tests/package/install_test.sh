#!/usr/bin/env bash
# The npm package as a user gets it: `npm pack` (which builds dist/ and the
# prebuilt libmtc.so), the tarball's contents and that every link in its
# files resolves inside it (tests/package/check_links.ts), an offline install into an
# empty scratch project, and tests/package/smoke.ts run there, importing the
# package by name, under Bun and under Deno (node_modules, bare and npm:
# specifiers); copies to "cpu", and to "cuda:0" through the emulated driver;
# the doctor (`bunx multi-tensor-copier doctor`, and dist/cli.js under Deno)
# with no driver, with two emulated devices and under Deno without permissions;
# startLoader with a producer that imports the package (by name, npm:, and a
# second install) and uses every kind of leaf; Bun bundles and executables of
# an app with the loader, arenas, pinned tensors and a shipped example kernel,
# run from another folder, and that app under Deno (tests/package/bundles.sh).
# Then the version check of the packed bindings (a library that reports
# another version), the library lookup, Bun's bundles (bun build --compile
# and --outdir, run from another folder; an executable from the clone's
# sources, with the library beside it), the consumer's type check; the
# install sequences of the README (the same as docs/INSTALL.md's), run as
# written, each in a new folder with examples/kernel.ts as the app's main.ts
# (the "once published" ones against tests/package/registry.ts, serving the
# tarball); docs/EMBEDDING.md's commands in the app (the packaged C example
# built against the packaged mtc.h and library, the Python example); and the
# version and link-check unit tests under both runtimes.
# Exits non-zero on the first failure, saying what failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUN=$ROOT/node_modules/.bin/bun
DENO=$ROOT/node_modules/.bin/deno
TSC=$ROOT/node_modules/.bin/tsc
ZIG=$ROOT/.tools/zig
FAKE=$ROOT/zig-out/lib/libfakecuda.so
export DENO_NO_UPDATE_CHECK=1 DO_NOT_TRACK=1 NO_COLOR=1
# What the user's shell may set must not change what is tested.
unset MTC_LIBRARY_PATH MTC_CUDA_DRIVER MTC_TRACE_FFI
DENO_RUN=("$DENO" run --allow-ffi --allow-env --allow-read)

[ -x "$BUN" ] && [ -x "$DENO" ] && [ -x "$ZIG" ] || bash scripts/setup.sh
[ -f "$FAKE" ] || "$ZIG" build

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mtc-package.XXXXXX")
# The README's install commands run `npm pack` in the checkout, which writes
# the .tgz there: removed at the end unless it was there before.
README_TGZ=$ROOT/$(node -p 'const p = require("./package.json"); `${p.name}-${p.version}.tgz`')
[ -e "$README_TGZ" ] && README_TGZ=
REGISTRY_PID=
cleanup() {
  [ -z "$REGISTRY_PID" ] || kill "$REGISTRY_PID" 2>/dev/null || true
  [ -z "$README_TGZ" ] || rm -f "$README_TGZ"
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "install test: FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }
# expect_output TEXT COMMAND...: runs COMMAND, shows its output, fails unless it includes TEXT
expect_output() {
  local text=$1 out rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || { echo "$out"; fail "exit status $rc from: $*"; }
  echo "$out"
  grep -qF -- "$text" <<<"$out" || fail "expected \"$text\" in the output of: $*"
}

VERSION=$(node -p 'require("./package.json").version')
NAME=$(node -p 'require("./package.json").name')

step "npm pack (prepack builds dist/ with tsup, and libmtc.so for linux-x64 and linux-arm64 in prebuilt/)"
npm pack --pack-destination "$WORK" --loglevel=error >"$WORK/pack.log" 2>&1 || { cat "$WORK/pack.log"; fail "npm pack"; }
TARBALL=$WORK/$NAME-$VERSION.tgz
[ -f "$TARBALL" ] || { cat "$WORK/pack.log"; fail "npm pack made no $TARBALL"; }
echo "$(basename "$TARBALL"): $(du -k "$TARBALL" | cut -f1) KiB"

step "tarball contents"
tar -tzf "$TARBALL" | sed 's|^package/||' | sort >"$WORK/files"
# The docs the README links to, and for embedders the C header and the C and Python examples.
for f in package.json README.md LICENSE CHANGELOG.md dist/mod.js dist/mod.js.map dist/loader_worker.js dist/loader_worker.js.map dist/cli.js dist/bun.js dist/types/mod.d.ts \
  dist/examples/kernel_ptx.js dist/types/examples/kernel_ptx.d.ts prebuilt/linux-{x64,arm64}/libmtc.so prebuilt/linux-{x64,arm64}/libcuda-emulated.so docs/*.md \
  lib/include/mtc.h ts/mod.ts ts/worker.ts examples/c/copy_batch.c examples/python/copy_batch.py examples/kernel.ts examples/kernel_ptx.ts examples/arena_loader.ts bench/bench.ts; do
  grep -qxF "$f" "$WORK/files" || fail "the tarball lacks $f"
done
unexpected=$(grep -vE '^(package\.json|README\.md|LICENSE|CHANGELOG\.md|dist/(mod|loader_worker|cli|examples/kernel_ptx)\.js(\.map)?|dist/bun\.js|dist/types/.+\.d\.ts|prebuilt/linux-(x64|arm64)/lib(mtc|cuda-emulated)\.so|docs/[A-Z-]+\.md|docs/traces/[a-z0-9-]+\.svg|lib/include/.+\.h|ts/[a-z_/]+\.ts|examples/[a-z_]+\.ts|examples/c/[a-z_]+\.c|examples/python/[a-z_]+\.py|bench/[a-z_]+\.ts|bench/c/[a-z_]+\.[ch])$' "$WORK/files" || true)
[ -z "$unexpected" ] || fail "the tarball holds files it should not: $unexpected"
grep -qxF ts/testing.ts "$WORK/files" && fail "the tarball holds ts/testing.ts (test helpers, not published)"
echo "$(wc -l <"$WORK/files") files: package.json, README.md, LICENSE, CHANGELOG.md, dist/mod.js, loader_worker.js and examples/kernel_ptx.js with their maps, dist/bun.js, $(grep -c '^dist/types/' "$WORK/files") declarations," \
  "prebuilt/linux-x64/ and linux-arm64/ (libmtc.so, libcuda-emulated.so), $(grep -c '^docs/' "$WORK/files") docs, $(grep -c '^lib/include/' "$WORK/files") C header(s), $(grep -c '^ts/' "$WORK/files") sources," \
  "$(grep -c '^examples/' "$WORK/files") examples, $(grep -c '^bench/' "$WORK/files") benchmark files"
grep -l 'from "bun:ffi"\|import("bun:ffi")\|require("bun:ffi")' "$ROOT"/dist/*.js &&
  fail "a module of dist/ imports bun:ffi statically (Deno cannot load it)"
grep -rhE '(from|import\()\s*"\.\.?/[^"]*\.ts"' "$ROOT/dist/types" --include='*.d.ts' | grep -qvE '^\s*(\*|//)' &&
  fail "a declaration in dist/types imports a .ts file"
echo "dist/ reaches bun:ffi only through import.meta.require; declarations import .js"
for js in mod loader_worker; do
  tail -n 1 "$ROOT/dist/$js.js" | grep -qxF "//# sourceMappingURL=$js.js.map" || fail "dist/$js.js does not name its source map"
done
# The maps point at the sources the package ships (ts/), so that frames and debuggers name files that exist.
node -e '
  const fs = require("fs"), path = require("path");
  const files = new Set(fs.readFileSync(process.argv[1], "utf8").split("\n"));
  for (const map of ["dist/mod.js.map", "dist/loader_worker.js.map", "dist/examples/kernel_ptx.js.map"]) {
    const m = JSON.parse(fs.readFileSync(path.join(process.argv[2], map), "utf8"));
    const missing = m.sources.map((s) => path.posix.join(path.posix.dirname(map), s)).filter((s) => !files.has(s));
    if (!m.sources.some((s) => s.endsWith("ts/copy/start_copy.ts") || s.endsWith("examples/kernel_ptx.ts")) || missing.length) {
      console.error(`${map}: sources the tarball lacks: ${missing.join(" ") || "(none: no ts/ source at all)"}`);
      process.exit(1);
    }
  }' "$WORK/files" "$ROOT" || fail "a source map of dist/ points at sources the tarball lacks"
# The worker script is whole (it imports nothing of the package's), so that a bundler can carry it as one file.
grep -qE '^import .* from "\./' "$ROOT/dist/loader_worker.js" && fail "dist/loader_worker.js imports another file of the package"
grep -q 'import loaderWorker from "./loader_worker.js" with { type: "file" }' "$ROOT/dist/bun.js" || fail "dist/bun.js does not import the worker script as a file"
echo "the source maps point at ts/ and examples/, which the tarball holds; dist/loader_worker.js imports nothing, dist/bun.js imports it as a file"

step "prebuilt libmtc.so, linux-x64 and linux-arm64: its CPU, glibc 2.28 at most, mtc_ symbols only, the same kernels"
mkdir "$WORK/unpacked"
tar -xzf "$TARBALL" -C "$WORK/unpacked"
PREBUILT=$WORK/unpacked/package/prebuilt
SO=$PREBUILT/linux-x64/libmtc.so
for platform in "linux-x64:X86-64" "linux-arm64:AArch64"; do
  folder=${platform%%:*}
  for lib in "$PREBUILT/$folder/libmtc.so" "$PREBUILT/$folder/libcuda-emulated.so"; do
    name=$folder/$(basename "$lib")
    machine=$(readelf -h "$lib" | sed -nE 's/^ *Machine: *//p')
    [[ "$machine" == *"${platform#*:}" ]] || fail "$name is built for $machine, not ${platform#*:}"
    newest=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
    [ "$(printf '%s\n' "$newest" 2.28 | sort -V | tail -1)" = 2.28 ] || fail "$name needs GLIBC_$newest (more than 2.28)"
  done
  lib=$PREBUILT/$folder/libmtc.so
  bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^mtc_' || true)
  [ -z "$bad" ] || fail "$folder/libmtc.so exports symbols outside mtc_: $bad"
  echo "$folder: $machine; libmtc.so and libcuda-emulated.so need GLIBC_2.28 at most; libmtc.so exports $(nm -D --defined-only "$lib" | grep -c ' mtc_') mtc_ symbols"
done
[ "$(nm -D --defined-only "$SO" | awk '{print $3}' | sort)" = "$(nm -D --defined-only "$PREBUILT/linux-arm64/libmtc.so" | awk '{print $3}' | sort)" ] ||
  fail "linux-x64/libmtc.so and linux-arm64/libmtc.so export different functions"
# The kernels are GPU code, one fatbin whatever the host CPU: both embed the same bytes.
fatbins=$(python3 - "$SO" "$PREBUILT/linux-arm64/libmtc.so" <<'PY'
import hashlib, struct, sys
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    at = data.find(bytes.fromhex("50ed55ba"))  # a fatbin's magic, 0xBA55ED50
    if at < 0:
        print("none")
        continue
    header, size = struct.unpack_from("<H", data, at + 6)[0], struct.unpack_from("<Q", data, at + 8)[0]
    print(hashlib.sha256(data[at:at + header + size]).hexdigest())
PY
)
if [ "$(head -1 <<<"$fatbins")" = none ]; then
  [ "${MTC_SETUP_NVCC:-1}" = 0 ] || fail "linux-x64/libmtc.so embeds no fatbin"
  echo "no kernels (MTC_SETUP_NVCC=0)"
else
  [ "$(sort -u <<<"$fatbins" | wc -l)" = 1 ] || fail "linux-x64 and linux-arm64 embed different kernels: $(tr '\n' ' ' <<<"$fatbins")"
  echo "the same exports and the same fatbin (sha256 $(head -c 16 <<<"$fatbins")...) in both"
fi

step "prebuilt libmtc.so and libcuda-emulated.so: stripped, and no path of the machine that built them"
zig_lib=$(dirname "$(readlink -f "$ZIG")")
for lib in "$PREBUILT"/linux-{x64,arm64}/lib{mtc,cuda-emulated}.so; do
  name=$(basename "$(dirname "$lib")")/$(basename "$lib")
  debug=$(readelf -S --wide "$lib" | grep -oE '\.(z?debug|gnu_debuglink)[a-z_.]*' | sort -u | tr '\n' ' ' || true)
  [ -z "$debug" ] || fail "$name carries debug sections: $debug"
  leaks=$(strings -n 4 "$lib" | grep -F -e "$ROOT" -e "$zig_lib" -e "${HOME:-/nonexistent-home}/" -e ".zig-cache" -e ".cache/zig" -e "/tmp/" || true)
  leaks+=$(strings -n 4 "$lib" | grep -E '/[^ ]*\.(c|h|cu|cuh|zig)\b' || true)
  [ -z "$leaks" ] || fail "$name names paths of the build machine: $(head -5 <<<"$leaks")"
done
echo "no debug sections; names neither the checkout ($ROOT), nor the toolchain, nor a source file's path"

step "links in the shipped files (Markdown, doc comments of dist/): each resolves inside the tarball"
"$DENO" run --allow-read tests/package/check_links.ts "$WORK/unpacked/package" || fail "a shipped file links to what the tarball lacks (tests/package/check_links.ts)"

step "package.json: no runtime dependencies"
node -e '
  const p = require(process.argv[1]);
  for (const k of ["dependencies", "peerDependencies", "optionalDependencies", "bundleDependencies"]) {
    if (p[k] && Object.keys(p[k]).length) { console.error(`${k}: ${Object.keys(p[k])}`); process.exit(1); }
  }' "$WORK/unpacked/package/package.json" || fail "the package has runtime dependencies"
echo "none (devDependencies are not installed by users)"

step "package.json: os linux, cpu x64 and arm64, so that npm refuses other platforms (npm told it runs on darwin, then on ppc64)"
node -e '
  const p = require(process.argv[1]);
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  if (!same(p.os, ["linux"]) || !same(p.cpu, ["x64", "arm64"])) { console.error(`os ${JSON.stringify(p.os)}, cpu ${JSON.stringify(p.cpu)}`); process.exit(1); }
  ' "$WORK/unpacked/package/package.json" || fail "package.json should say os [\"linux\"] and cpu [\"x64\", \"arm64\"] (the prebuilt libraries)"
for fake in "platform darwin" "arch ppc64"; do
  set -- $fake
  mkdir -p "$WORK/refused-$2"
  printf "Object.defineProperty(process, '%s', { value: '%s' });\n" "$1" "$2" >"$WORK/refused-$2/as-$2.cjs"
  out=$(cd "$WORK/refused-$2" && NODE_OPTIONS="--require=$WORK/refused-$2/as-$2.cjs" \
    npm install --offline --no-audit --no-fund "$TARBALL" 2>&1) && fail "npm installed the package on $2: $out"
  grep -q "EBADPLATFORM" <<<"$out" || fail "npm on $2 failed, but not with EBADPLATFORM: $out"
  echo "npm on $2: $(grep -m1 'Unsupported platform' <<<"$out" | sed 's/^npm error //')"
done

step "offline install into an empty project"
APP=$WORK/app
mkdir "$APP"
printf '{ "name": "mtc-consumer", "private": true, "type": "module" }\n' >"$APP/package.json"
(cd "$APP" && npm install --offline --no-audit --no-fund --loglevel=error "$TARBALL") || fail "npm install --offline of the tarball"
cp tests/package/smoke.ts tests/package/loader_smoke.ts tests/package/loader_batches.ts tests/package/two_installs.ts tests/package/app.ts tests/package/frames.ts "$APP/"
# The README's first example, as a user pastes it (it imports the package by name).
awk '/^```ts$/ && !done { grab = 1; next } grab && /^```$/ { grab = 0; done = 1 } grab' README.md >"$APP/readme_first.ts"
grep -q 'from "multi-tensor-copier"' "$APP/readme_first.ts" || fail "the README's first example does not import multi-tensor-copier"
sed 's|from "multi-tensor-copier"|from "npm:multi-tensor-copier"|' tests/package/smoke.ts >"$APP/smoke_npm.ts"
[ -d "$APP/node_modules/$NAME/dist" ] || fail "no node_modules/$NAME/dist after install"
ls "$APP/node_modules"

cd "$APP"
# The package is built with the CUDA kernels unless setup was told to skip nvcc.
KERNELS=true
[ "${MTC_SETUP_NVCC:-1}" = 0 ] && KERNELS=false
step "Bun: copy to cpu (no CUDA driver)"
expect_output "libmtc $VERSION, kernels $KERNELS: cpu copy ok" env MTC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$BUN" smoke.ts
step "Bun: copy to cuda:0 and back (emulated driver)"
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER="$FAKE" "$BUN" smoke.ts
step "Deno (node_modules, bare specifier): copy to cpu (no CUDA driver)"
expect_output "cpu copy ok" env MTC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "${DENO_RUN[@]}" smoke.ts
step "Deno (node_modules, bare specifier): copy to cuda:0 and back (emulated driver)"
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" smoke.ts
step "MTC_CUDA_DRIVER=emulated: the packaged emulated driver, Bun and Deno (docs/TESTING.md, CPU-only CI)"
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER=emulated "$BUN" smoke.ts
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER=emulated "${DENO_RUN[@]}" smoke.ts
step "the doctor from the package (docs/TROUBLESHOOTING.md): bunx, and Deno from node_modules; no driver: exit 1 saying why; the emulated driver: exit 0, two devices and their peer access"
# doctor_check COMMAND...: the doctor with no driver, then with two emulated devices.
doctor_check() {
  local out rc=0
  out=$(env MTC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$@" 2>&1) || rc=$?
  sed 's/^/    /' <<<"$out"
  [ "$rc" -eq 1 ] || fail "the doctor exited $rc, not 1, with no driver: $*"
  grep -qF "FAIL: a copy to a GPU would not work here: could not load the CUDA driver /nonexistent/libcuda.so.1" <<<"$out" ||
    fail "the doctor with no driver does not say why: $*"
  rc=0
  out=$(env MTC_CUDA_DRIVER=emulated FAKE_CUDA_DEVICE_COUNT=2 "$@" 2>&1) || rc=$?
  sed 's/^/    /' <<<"$out"
  [ "$rc" -eq 0 ] || fail "the doctor exited $rc under the emulated driver: $*"
  for want in "library: $APP/node_modules/$NAME/prebuilt/linux-x64/libmtc.so" "devices: 2" "cuda:0  Emulated GPU 0, 8.0 GiB" \
    "cuda:1  Emulated GPU 1, 8.0 GiB" "ok: copies to and from cuda:0 work"; do
    grep -qF -- "$want" <<<"$out" || fail "the doctor under the emulated driver does not say \"$want\": $*"
  done
  grep -qE '^  cuda:0 +- +yes *$' <<<"$out" && grep -qE '^  cuda:1 +yes +- *$' <<<"$out" ||
    fail "the doctor under the emulated driver shows no peer-access matrix of two peers: $*"
}
# bunx runs the package's bin (dist/cli.js, #!/usr/bin/env bun): bun and bunx on PATH, as a user has them.
doctor_check env PATH="$ROOT/node_modules/.bin:$PATH" bunx multi-tensor-copier doctor
doctor_check "${DENO_RUN[@]}" "node_modules/$NAME/dist/cli.js" doctor --no-probe
out=$("$DENO" run --no-prompt "node_modules/$NAME/dist/cli.js" doctor 2>&1) && fail "the doctor exited 0 under Deno without permissions: $out"
grep -qF "FAIL: a copy to a GPU would not work here:" <<<"$out" && grep -qF "Deno's FFI permission is not granted" <<<"$out" ||
  { echo "$out"; fail "the doctor under Deno without permissions does not say which are missing"; }
echo "Deno without permissions: $(tail -1 <<<"$out")"
step "startLoader from the package: its workers run dist/loader_worker.js; the producer imports the package, every kind of leaf; Bun and Deno (emulated driver)"
LOADER_OK="loader ok: 0,1,2,3,4,5: tensor, array, arenaTensor, arenaArray, pinned, strided, complex as DeviceTensors with the producer's values; arena leaves read in place"
expect_output "$LOADER_OK" env MTC_CUDA_DRIVER="$FAKE" "$BUN" loader_smoke.ts
expect_output "$LOADER_OK" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" loader_smoke.ts
step "the same with a producer importing npm:multi-tensor-copier (Deno), then a second install of the package (its own node_modules): one class identity"
sed 's|from "multi-tensor-copier"|from "npm:multi-tensor-copier"|' loader_batches.ts >loader_batches_npm.ts
expect_output "$LOADER_OK" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" loader_smoke.ts ./loader_batches_npm.ts
mkdir second
printf '{ "name": "mtc-second", "private": true, "type": "module" }\n' >second/package.json
(cd second && npm install --offline --no-audit --no-fund --loglevel=error "$TARBALL") || fail "npm install --offline of the tarball into a second folder"
sed 's|from "multi-tensor-copier"|from "./node_modules/multi-tensor-copier/dist/mod.js"|' loader_batches.ts >second/loader_batches.ts
expect_output "$LOADER_OK" env MTC_CUDA_DRIVER="$FAKE" "$BUN" loader_smoke.ts ./second/loader_batches.ts
expect_output "$LOADER_OK" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" loader_smoke.ts ./second/loader_batches.ts
expect_output "two installs: one set of classes" env MTC_CUDA_DRIVER="$FAKE" "$BUN" two_installs.ts
expect_output "two installs: one set of classes" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" two_installs.ts
step "Deno (node_modules, npm: specifier): copy to cuda:0 and back (emulated driver)"
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" smoke_npm.ts
step "class names kept by the bundle (keepNames), and console.log's one line for a DeviceTensor"
printf '%s\n' 'import { AsyncCopyHandle, DeviceTensor, MtcError, Stream, Tensor } from "multi-tensor-copier";' \
  'console.log([AsyncCopyHandle, DeviceTensor, MtcError, Stream, Tensor].map((c) => c.name).join(" "));' \
  'console.log(DeviceTensor.empty([2, 3], "float32", "cuda:0"));' >names.ts
expect_output "AsyncCopyHandle DeviceTensor MtcError Stream Tensor" env MTC_CUDA_DRIVER="$FAKE" "$BUN" names.ts
expect_output "DeviceTensor(float32 [2, 3] cuda:0)" env MTC_CUDA_DRIVER="$FAKE" "$BUN" names.ts
expect_output "DeviceTensor(float32 [2, 3] cuda:0)" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" names.ts
step "the README's first example, Bun and Deno: no driver (says why, copies to cpu), then the emulated driver"
expect_output "no CUDA device (could not load the CUDA driver /nonexistent/libcuda.so.1" \
  env MTC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "$BUN" readme_first.ts
expect_output "cpu [ 30, 4 ] cam1" env MTC_CUDA_DRIVER=/nonexistent/libcuda.so.1 "${DENO_RUN[@]}" readme_first.ts
expect_output "cuda:0 [ 30, 4 ] cam1" env MTC_CUDA_DRIVER="$FAKE" "$BUN" readme_first.ts
expect_output "cuda:0 [ 30, 4 ] cam1" env MTC_CUDA_DRIVER="$FAKE" "${DENO_RUN[@]}" readme_first.ts
step "Deno without --allow-ffi, or with it scoped to the library's path: one error that says which flags"
expect_output "run deno with --allow-ffi, --allow-env and --allow-read" "$DENO" run --no-prompt smoke.ts \
  --expect-error "Deno's FFI permission is not granted"
expect_output "with no path after --allow-ffi" "$DENO" run --no-prompt --allow-env --allow-read \
  --allow-ffi="$APP/node_modules/$NAME/prebuilt/linux-x64/libmtc.so" smoke.ts --expect-error "covers only"

step "the packed bindings check the library's version"
for v in "990000 99.0.0" "200 0.2.0"; do
  set -- $v
  mkdir -p "$WORK/shim-$2"
  "$ZIG" cc -shared -fPIC -O1 -DVERSION_NUMBER="$1" -DVERSION_STRING="\"$2\"" \
    -o "$WORK/shim-$2/libmtc.so" "$ROOT/tests/package/version_shim.c" || fail "building the version shim"
  want="libmtc at $WORK/shim-$2/libmtc.so is version $2, but these bindings need 0.1.x"
  expect_output "error as expected" env MTC_LIBRARY_PATH="$WORK/shim-$2/libmtc.so" "$BUN" smoke.ts --expect-error "$want"
  expect_output "error as expected" env MTC_LIBRARY_PATH="$WORK/shim-$2/libmtc.so" "${DENO_RUN[@]}" smoke.ts --expect-error "$want"
done

step "library lookup: MTC_LIBRARY_PATH wins, then the packaged library"
expect_output "cpu and cuda:0 round trip ok" env MTC_LIBRARY_PATH="$ROOT/zig-out/lib/libmtc.so" MTC_CUDA_DRIVER="$FAKE" "$BUN" smoke.ts
expect_output "error as expected" env MTC_LIBRARY_PATH=/nonexistent/libmtc.so "$BUN" smoke.ts \
  --expect-error "MTC_LIBRARY_PATH names /nonexistent/libmtc.so, which does not exist"
mv "$APP/node_modules/$NAME/prebuilt/linux-x64/libmtc.so" "$WORK/moved.so"
# Bun's entry (dist/bun.js) imports the library as a file, so Bun stops at the import; dist/mod.js says where it looked.
out=$("$BUN" smoke.ts 2>&1) && fail "Bun imported the package without its prebuilt library"
grep -qF "Cannot find module '../prebuilt/linux-x64/libmtc.so'" <<<"$out" || { echo "$out"; fail "Bun's import error does not name the library"; }
echo "Bun: $(grep -m1 'Cannot find module' <<<"$out")"
sed "s|from \"multi-tensor-copier\"|from \"./node_modules/$NAME/dist/mod.js\"|" smoke.ts >smoke_mod.ts
expect_output "error as expected" "$BUN" smoke_mod.ts \
  --expect-error "no packaged library at $APP/node_modules/$NAME/prebuilt/linux-x64/libmtc.so"
expect_output "error as expected" "${DENO_RUN[@]}" smoke.ts --expect-error "the npm package ships libmtc for linux-x64"
mv "$WORK/moved.so" "$APP/node_modules/$NAME/prebuilt/linux-x64/libmtc.so"
step "library lookup by the CPU (Bun told it runs on arm64, then on ppc64): prebuilt/linux-arm64, else an error naming the platforms"
for arch in arm64 ppc64; do printf "Object.defineProperty(process, 'arch', { value: '%s' });\n" "$arch" >"as-$arch.js"; done
# An aarch64 library does not load on this x86-64 machine: the error names the one chosen.
expect_output "error as expected" "$BUN" --preload ./as-arm64.js smoke.ts \
  --expect-error "could not load libmtc from $APP/node_modules/$NAME/prebuilt/linux-arm64/libmtc.so (packaged library)"
expect_output "error as expected" "$BUN" --preload ./as-ppc64.js smoke.ts --expect-error \
  "this machine is linux-ppc64, for which the npm package has no libmtc (it ships linux-x64 and linux-arm64 with glibc 2.28 or newer)"

# Bun's bundles and executables, the app of the acceptance, Deno's frames, the shipped examples.
source "$ROOT/tests/package/bundles.sh"

step "type check of the consumer against the package's declarations (tsc without bun-types, deno check)"
printf '%s\n' '{ "compilerOptions": { "target": "ESNext", "module": "NodeNext", "moduleResolution": "NodeNext",' \
  '  "lib": ["ESNext"], "types": [], "strict": true, "noEmit": true, "skipLibCheck": false }, "files": ["smoke.ts"] }' \
  >tsconfig.json
"$TSC" -p tsconfig.json || fail "tsc on the consumer (NodeNext resolution)"
"$TSC" -p tsconfig.json --module ESNext --moduleResolution bundler || fail "tsc on the consumer (bundler resolution)"
# The README's example uses console, so it gets the DOM's declarations of it.
printf '%s\n' '{ "extends": "./tsconfig.json", "compilerOptions": { "lib": ["ESNext", "DOM"] }, "files": ["readme_first.ts"] }' \
  >tsconfig.readme.json
"$TSC" -p tsconfig.readme.json || fail "tsc on the README's first example"
"$DENO" check smoke.ts smoke_npm.ts readme_first.ts app.ts || fail "deno check on the consumer"
echo "tsc (NodeNext, bundler; the README's example) and deno check: clean"

step "for embedders, docs/EMBEDDING.md's commands as written in the app: the C example built against the packaged mtc.h and libmtc.so, the Python example"
embedding=$(awk '/^## In an installed package/ { section = 1; next } section && /^## / { exit }
  section && /^```sh$/ { grab = 1; next } grab && /^```$/ { exit } grab' "$ROOT/docs/EMBEDDING.md")
grep -q 'copy_batch.c' <<<"$embedding" && grep -q 'copy_batch.py' <<<"$embedding" ||
  fail "docs/EMBEDDING.md's \"In an installed package\" has no sh block building the C example and running the Python one"
sed 's/^/    /' <<<"$embedding"
# cc as the user has it, else zig's; NumPy from scripts/setup-numpy.sh where python3 has none.
mkdir -p "$WORK/bin"
command -v cc >/dev/null || printf '#!/bin/sh\nexec "%s" cc "$@"\n' "$ZIG" >"$WORK/bin/cc"
chmod +x "$WORK/bin/"* 2>/dev/null || true
numpy_path=
python3 -c 'import numpy' 2>/dev/null || numpy_path=$ROOT/.tools/python
if ! PYTHONPATH=$numpy_path python3 -c 'import numpy' 2>/dev/null; then
  echo "(no NumPy for python3, here or in .tools/python: the Python line is left out; scripts/setup-numpy.sh installs it)"
  embedding=$(grep -v 'copy_batch.py' <<<"$embedding")
fi
for driver in none "$FAKE"; do
  if [ "$driver" = none ]; then want="on cpu"; driver_env=(-u MTC_CUDA_DRIVER); else want="on cuda:0"; driver_env=(MTC_CUDA_DRIVER="$driver" FAKE_CUDA_DEVICE_COUNT=2); fi
  rm -f copy_batch
  out=$(env "${driver_env[@]}" PATH="$WORK/bin:$PATH" PYTHONPATH="$numpy_path" bash -euo pipefail -c "$embedding" 2>&1) ||
    { echo "$out"; fail "docs/EMBEDDING.md's commands in the app (driver: $driver)"; }
  grep -q "copy_batch: ok (.* checked $want)" <<<"$out" || { echo "$out"; fail "the packaged C example did not copy $want"; }
  grep "copy_batch: ok\|copy_batch.py: ok" <<<"$out" | sed "s/^/  ($([ "$driver" = none ] && echo 'no driver' || echo 'emulated driver')) /"
done

cd "$ROOT"
step "the install sequences of the README and docs/INSTALL.md, as written: the same in both; each in a new folder"
# A sequence: the lines of a ```sh block from a "# Bun, ..." or "# Deno, ..."
# comment to the next one or the block's end. Printed with a line "%%" between two.
sequences() {
  awk '/^```sh$/ { inblock = 1; first = 1; next }
    inblock && /^```$/ { inblock = 0; next }
    inblock && first { first = 0; if ($0 !~ /^# (Bun|Deno), /) { inblock = 0; next } }
    inblock && /^# (Bun|Deno), / { if (n++) print "%%" }
    inblock { print }' "$1"
}
sequences README.md >"$WORK/sequences"
if ! diff <(sequences docs/INSTALL.md) "$WORK/sequences" >"$WORK/sequences.diff"; then
  cat "$WORK/sequences.diff"
  fail "docs/INSTALL.md's install sequences differ from the README's (< INSTALL.md, > README.md)"
fi
labels=$(grep -E '^# (Bun|Deno), ' "$WORK/sequences" | sed -E 's/^# //; s/:.*//')
for want in "Bun, from the tarball" "Deno, from the tarball" "Bun, from the clone's sources" \
  "Deno, from the clone's sources" "Bun, once published" "Deno, once published"; do
  grep -qxF "$want" <<<"$labels" || fail "the README has no install sequence \"# $want\" (it has: $(tr '\n' ';' <<<"$labels"))"
done
# The one the once-published sequences install from: the tarball, served as the registry would.
"$DENO" run --allow-net=127.0.0.1 --allow-read --allow-write tests/package/registry.ts \
  "$TARBALL" "$WORK/unpacked/package/package.json" "$WORK/registry.port" &
REGISTRY_PID=$!
for _ in $(seq 100); do [ -s "$WORK/registry.port" ] && break; sleep 0.1; done
[ -s "$WORK/registry.port" ] || fail "the stand-in registry (tests/package/registry.ts) did not start"
REGISTRY=http://127.0.0.1:$(cat "$WORK/registry.port")/
awk -v dir="$WORK" '/^%%$/ { n++; next } { print > (dir "/sequence-" n ".sh") }' "$WORK/sequences"
for seq in "$WORK"/sequence-*.sh; do
  label=$(head -1 "$seq" | sed 's/^# //')
  dir=${seq%.sh}
  mkdir -p "$dir/my-app"
  ln -s "$ROOT" "$dir/mtc"
  # main.ts: examples/kernel.ts as an app has it, importing the package by name.
  sed 's|from "../ts/mod.ts"|from "multi-tensor-copier"|' examples/kernel.ts >"$dir/my-app/main.ts"
  cp examples/kernel_ptx.ts "$dir/my-app/"
  grep -q 'from "multi-tensor-copier"' "$dir/my-app/main.ts" || fail "examples/kernel.ts no longer imports ../ts/mod.ts"
  echo "$label:"
  sed 's/^/    /' "$seq"
  # bun and deno as a user has them on PATH; caches of their own, and the
  # registry the stand-in, so that nothing reaches (or is kept from) the real one.
  rc=0
  (cd "$dir" && env PATH="$ROOT/node_modules/.bin:$PATH" MTC_CUDA_DRIVER="$FAKE" NPM_CONFIG_REGISTRY="$REGISTRY" \
    npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false \
    BUN_INSTALL_CACHE_DIR="$WORK/bun-cache" DENO_DIR="$WORK/deno-dir" bash -euo pipefail "$seq") >"$dir.log" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { tail -30 "$dir.log"; fail "\"$label\" exited with status $rc"; }
  grep -q "every value is 2x + 1" "$dir.log" || { tail -30 "$dir.log"; fail "\"$label\": examples/kernel.ts did not check its results"; }
  echo "  -> $(grep "every value is 2x + 1" "$dir.log")"
done
kill "$REGISTRY_PID" 2>/dev/null || true
REGISTRY_PID=

step "version and link-check unit tests under Bun and Deno"
"$DENO" check tests/package/version.test.ts tests/package/links.test.ts tests/package/registry.ts || fail "deno check tests/package"
"$BUN" test tests/package/version.test.ts tests/package/links.test.ts || fail "bun test tests/package"
"$DENO" test --allow-read --allow-write --allow-env --allow-ffi tests/package/version.test.ts tests/package/links.test.ts ||
  fail "deno test tests/package"

echo
echo "install test: all checks passed"
