# Sourced by install_test.sh, in the scratch app ($APP) that installed the
# tarball: Bun's bundles and executables, and what the package ships for them
# (docs/INSTALL.md, "Bundling and single-file executables"), each run from
# another folder; app.ts (the loader, arenas, pinned tensors, a kernel of the
# package's examples) as a Bun app, compiled and bundled, and under Deno from
# node_modules; what a bundle that lacks a file says; Deno's stack frames
# against the installed files; the examples the docs name, shipped and run.

step "bundling with Bun (docs/INSTALL.md, \"Bundling and single-file executables\"), run from another folder"
# bun build --compile embeds the library (the package's Bun entry imports it as a file); --outdir copies it beside the bundle.
"$BUN" build --compile smoke.ts --outfile smoke-app >"$WORK/bun-build.log" 2>&1 || { cat "$WORK/bun-build.log"; fail "bun build --compile"; }
"$BUN" build smoke.ts --outdir out --target bun >>"$WORK/bun-build.log" 2>&1 || { cat "$WORK/bun-build.log"; fail "bun build --outdir"; }
ls out | grep -qE '^libmtc-[a-z0-9]+\.so$' || fail "bun build --outdir put no libmtc beside the bundle: $(ls out)"
mkdir "$WORK/deploy"
mv smoke-app out "$WORK/deploy/"
cd "$WORK"
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER="$FAKE" deploy/smoke-app
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER="$FAKE" "$BUN" deploy/out/smoke.js
# A library beside the executable comes first: with the emulated driver beside it, MTC_CUDA_DRIVER=emulated finds that.
cp "$WORK/unpacked/package/prebuilt/linux-x64/libmtc.so" "$WORK/unpacked/package/prebuilt/linux-x64/libcuda-emulated.so" deploy/
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER=emulated deploy/smoke-app
# From the clone's sources nothing is embedded: the executable says where to put the library, and finds it there.
sed "s|from \"multi-tensor-copier\"|from \"$ROOT/ts/mod.ts\"|" "$APP/smoke.ts" >"$APP/smoke_src.ts"
"$BUN" build --compile "$APP/smoke_src.ts" --outfile "$WORK/deploy-src/smoke-app" >"$WORK/bun-build.log" 2>&1 ||
  { cat "$WORK/bun-build.log"; fail "bun build --compile of the clone's sources"; }
expect_output "error as expected" deploy-src/smoke-app --expect-error "put libmtc.so beside it, at $WORK/deploy-src/libmtc.so"
cp "$ROOT/zig-out/lib/libmtc.so" "$FAKE" deploy-src/
expect_output "cpu and cuda:0 round trip ok" env MTC_CUDA_DRIVER=emulated deploy-src/smoke-app
cd "$APP"

APP_OK="app ok: batches 0,1,2,3,4,5 from the loader (arena and pinned leaves), scale_add_f32 of the package's examples on each: 2x + 1"
step "the app (loader, arenas, pinned tensors, the package's example kernel) from node_modules: Bun, Deno (emulated driver)"
expect_output "$APP_OK" env MTC_CUDA_DRIVER=emulated "$BUN" app.ts
expect_output "$APP_OK" env MTC_CUDA_DRIVER=emulated "${DENO_RUN[@]}" app.ts

step "the app compiled (bun build --compile) and bundled (bun build --outdir), its producer an entry point, run from another folder"
"$BUN" build --compile app.ts loader_batches.ts --outfile app-exe >"$WORK/bun-build.log" 2>&1 || { cat "$WORK/bun-build.log"; fail "bun build --compile app.ts"; }
"$BUN" build app.ts loader_batches.ts --outdir app-out --target bun >>"$WORK/bun-build.log" 2>&1 || { cat "$WORK/bun-build.log"; fail "bun build --outdir app.ts"; }
ls app-out | grep -qE '^loader_worker-[a-z0-9]+\.js$' || fail "bun build --outdir put no loader worker script beside the bundle: $(ls app-out)"
mkdir "$WORK/deploy-app"
mv app-exe app-out "$WORK/deploy-app/"
cd "$WORK"
# The executable's library is a temporary copy: the emulated driver is looked for beside the program too, and the error says what to ship.
out=$(env MTC_CUDA_DRIVER=emulated deploy-app/app-exe 2>&1) && fail "the executable ran on MTC_CUDA_DRIVER=emulated with no emulated driver shipped: $out"
grep -qF "next to the program in $WORK/deploy-app/; put libcuda-emulated.so" <<<"$out" || { echo "$out"; fail "MTC_CUDA_DRIVER=emulated without the emulated driver does not say what to ship"; }
echo "without libcuda-emulated.so: $(grep -m1 -o 'MTC_CUDA_DRIVER=emulated: no emulated driver.*' <<<"$out")"
cp "$WORK/unpacked/package/prebuilt/linux-x64/libcuda-emulated.so" deploy-app/
cp "$WORK/unpacked/package/prebuilt/linux-x64/libcuda-emulated.so" deploy-app/app-out/
expect_output "$APP_OK" env MTC_CUDA_DRIVER=emulated deploy-app/app-exe
expect_output "$APP_OK" env MTC_CUDA_DRIVER=emulated "$BUN" deploy-app/app-out/app.js
cd "$APP"

step "a bundle or an executable that lacks a file the loader needs fails at startLoader saying what to ship"
"$BUN" build --compile app.ts --outfile "$WORK/deploy-app/no-producer" >"$WORK/bun-build.log" 2>&1 || { cat "$WORK/bun-build.log"; fail "bun build --compile app.ts alone"; }
out=$(cd "$WORK" && env MTC_CUDA_DRIVER=emulated deploy-app/no-producer 2>&1) && fail "an executable without its producer module ran: $out"
grep -qF 'the producer module /$bunfs/root/loader_batches.ts is not there' <<<"$out" && grep -qF 'list the producer module among the entry points of `bun build --compile`' <<<"$out" ||
  { echo "$out"; fail "an executable without its producer module does not say to list it as an entry point"; }
grep -m1 '^MtcError: startLoader: the producer module' <<<"$out"
rm "$WORK"/deploy-app/app-out/loader_worker-*.js
out=$(cd "$WORK" && env MTC_CUDA_DRIVER=emulated "$BUN" deploy-app/app-out/app.js 2>&1) && fail "a bundle without its loader worker script ran: $out"
grep -qF "startLoader: no loader worker script at $WORK/deploy-app/app-out/loader_worker-" <<<"$out" && grep -qF "dist/loader_worker.js" <<<"$out" ||
  { echo "$out"; fail "a bundle without its loader worker script does not say what to ship"; }
grep -m1 '^MtcError: startLoader: no loader worker script' <<<"$out"

step "Deno's stack frames name files and lines of the installed package (its source maps point at the ts/ it ships)"
expect_output "frames ok" env MTC_CUDA_DRIVER=emulated "${DENO_RUN[@]}" frames.ts

step "the examples and benchmarks the docs name are in the tarball; examples/kernel.ts runs where it lies (Bun)"
named=$(cd "$WORK/unpacked/package" && grep -ohE '\b(examples|bench)/[a-z_/]+(\.(ts|c|py|h))?' README.md docs/*.md | sort -u)
for path in $named; do
  # A path with no extension is a folder or a program built from its .c.
  grep -qxF "$path" "$WORK/files" || grep -q "^${path%/}[/.]" "$WORK/files" || fail "the docs name $path, which the tarball lacks"
done
echo "$(wc -w <<<"$named") paths under examples/ and bench/ named by the README and docs/: all shipped"
expect_output "every value is 2x + 1" env MTC_CUDA_DRIVER=emulated "$BUN" "node_modules/$NAME/examples/kernel.ts"
