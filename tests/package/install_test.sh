#!/usr/bin/env bash
# The npm package as a user gets it: `npm pack` (which builds dist/ and the
# prebuilt libmtc.so), the tarball's contents, an offline install into an
# empty scratch project, and tests/package/smoke.ts run there, importing the
# package by name, under Bun and under Deno (node_modules, bare and npm:
# specifiers); copies to "cpu", and to "cuda:0" through the emulated driver.
# Then the version check of the packed bindings (a library that reports
# another version), the library lookup, the consumer's type check, and the
# version unit tests (tests/package/version.test.ts) under both runtimes.
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
trap 'rm -rf "$WORK"' EXIT

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

step "npm pack (prepack builds dist/ with tsup and prebuilt/linux-x64/libmtc.so)"
npm pack --pack-destination "$WORK" --loglevel=error >"$WORK/pack.log" 2>&1 || { cat "$WORK/pack.log"; fail "npm pack"; }
TARBALL=$WORK/$NAME-$VERSION.tgz
[ -f "$TARBALL" ] || { cat "$WORK/pack.log"; fail "npm pack made no $TARBALL"; }
echo "$(basename "$TARBALL"): $(du -k "$TARBALL" | cut -f1) KiB"

step "tarball contents"
tar -tzf "$TARBALL" | sed 's|^package/||' | sort >"$WORK/files"
for f in package.json README.md LICENSE dist/mod.js dist/mod.js.map dist/types/mod.d.ts prebuilt/linux-x64/libmtc.so prebuilt/linux-x64/libcuda-emulated.so; do
  grep -qxF "$f" "$WORK/files" || fail "the tarball lacks $f"
done
unexpected=$(grep -vE '^(package\.json|README\.md|LICENSE|dist/mod\.js(\.map)?|dist/types/.+\.d\.ts|prebuilt/linux-x64/lib(mtc|cuda-emulated)\.so)$' "$WORK/files" || true)
[ -z "$unexpected" ] || fail "the tarball holds files it should not: $unexpected"
echo "$(wc -l <"$WORK/files") files: package.json, README.md, LICENSE, dist/mod.js and its map, $(grep -c '^dist/types/' "$WORK/files") declarations, prebuilt/linux-x64/libmtc.so and libcuda-emulated.so"
grep -q 'from "bun:ffi"\|import("bun:ffi")\|require("bun:ffi")' "$ROOT/dist/mod.js" &&
  fail "dist/mod.js imports bun:ffi statically (Deno cannot load it)"
grep -rhE '(from|import\()\s*"\.\.?/[^"]*\.ts"' "$ROOT/dist/types" --include='*.d.ts' | grep -qvE '^\s*(\*|//)' &&
  fail "a declaration in dist/types imports a .ts file"
echo "dist/mod.js reaches bun:ffi only through import.meta.require; declarations import .js"
tail -n 1 "$ROOT/dist/mod.js" | grep -qxF '//# sourceMappingURL=mod.js.map' || fail "dist/mod.js does not name its source map"
node -e '
  const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const i = m.sources.findIndex((s) => s.endsWith("ts/copy/start_copy.ts"));
  if (i < 0 || !m.sourcesContent || !m.sourcesContent[i].includes("export function startCopy")) process.exit(1);' \
  "$ROOT/dist/mod.js.map" || fail "dist/mod.js.map does not carry the sources (ts/copy/start_copy.ts)"
echo "dist/mod.js.map maps to ts/ with the sources inlined"

step "prebuilt libmtc.so: glibc 2.28 at most, mtc_ symbols only"
mkdir "$WORK/unpacked"
tar -xzf "$TARBALL" -C "$WORK/unpacked"
SO=$WORK/unpacked/package/prebuilt/linux-x64/libmtc.so
newest=$(objdump -T "$SO" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
[ "$(printf '%s\n' "$newest" 2.28 | sort -V | tail -1)" = 2.28 ] || fail "libmtc.so needs GLIBC_$newest (more than 2.28)"
bad=$(nm -D --defined-only "$SO" | awk '{print $3}' | grep -v '^mtc_' || true)
[ -z "$bad" ] || fail "libmtc.so exports symbols outside mtc_: $bad"
echo "needs GLIBC_$newest at most; exports $(nm -D --defined-only "$SO" | grep -c ' mtc_') mtc_ symbols"

step "prebuilt libmtc.so and libcuda-emulated.so: stripped, and no path of the machine that built them"
EMULATED=$WORK/unpacked/package/prebuilt/linux-x64/libcuda-emulated.so
zig_lib=$(dirname "$(readlink -f "$ZIG")")
for lib in "$SO" "$EMULATED"; do
  name=$(basename "$lib")
  debug=$(readelf -S --wide "$lib" | grep -oE '\.(z?debug|gnu_debuglink)[a-z_.]*' | sort -u | tr '\n' ' ' || true)
  [ -z "$debug" ] || fail "$name carries debug sections: $debug"
  leaks=$(strings -n 4 "$lib" | grep -F -e "$ROOT" -e "$zig_lib" -e "${HOME:-/nonexistent-home}/" -e ".zig-cache" -e ".cache/zig" -e "/tmp/" || true)
  leaks+=$(strings -n 4 "$lib" | grep -E '/[^ ]*\.(c|h|cu|cuh|zig)\b' || true)
  [ -z "$leaks" ] || fail "$name names paths of the build machine: $(head -5 <<<"$leaks")"
done
newest=$(objdump -T "$EMULATED" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
[ "$(printf '%s\n' "$newest" 2.28 | sort -V | tail -1)" = 2.28 ] || fail "libcuda-emulated.so needs GLIBC_$newest (more than 2.28)"
echo "no debug sections; names neither the checkout ($ROOT), nor the toolchain, nor a source file's path; the emulated driver needs GLIBC_$newest at most"

step "package.json: no runtime dependencies"
node -e '
  const p = require(process.argv[1]);
  for (const k of ["dependencies", "peerDependencies", "optionalDependencies", "bundleDependencies"]) {
    if (p[k] && Object.keys(p[k]).length) { console.error(`${k}: ${Object.keys(p[k])}`); process.exit(1); }
  }' "$WORK/unpacked/package/package.json" || fail "the package has runtime dependencies"
echo "none (devDependencies are not installed by users)"

step "offline install into an empty project"
APP=$WORK/app
mkdir "$APP"
printf '{ "name": "mtc-consumer", "private": true, "type": "module" }\n' >"$APP/package.json"
(cd "$APP" && npm install --offline --no-audit --no-fund --loglevel=error "$TARBALL") || fail "npm install --offline of the tarball"
cp tests/package/smoke.ts "$APP/smoke.ts"
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
expect_output "error as expected" "$BUN" smoke.ts \
  --expect-error "no packaged library at $APP/node_modules/$NAME/prebuilt/linux-x64/libmtc.so"
expect_output "error as expected" "${DENO_RUN[@]}" smoke.ts --expect-error "the npm package ships libmtc for linux-x64"
mv "$WORK/moved.so" "$APP/node_modules/$NAME/prebuilt/linux-x64/libmtc.so"

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
"$DENO" check smoke.ts smoke_npm.ts readme_first.ts || fail "deno check on the consumer"
echo "tsc (NodeNext, bundler; the README's example) and deno check: clean"

cd "$ROOT"
step "version unit tests under Bun and Deno"
"$DENO" check tests/package/version.test.ts || fail "deno check tests/package"
"$BUN" test tests/package/version.test.ts || fail "bun test tests/package"
"$DENO" test --allow-read --allow-env --allow-ffi tests/package/version.test.ts || fail "deno test tests/package"

echo
echo "install test: all checks passed"
