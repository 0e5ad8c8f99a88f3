// Loading libmtc, its version, status names, and the FFI helpers.
import { Status, statusName } from "../../ts/base/errors.ts";
import { currentBackend, library, loadLibrary, requireSymbol } from "../../ts/ffi/library.ts";
import { localBuildPath, platformTag, PREBUILT_PLATFORMS, prebuiltTag } from "../../ts/ffi/lookup.ts";
import { EXPECTED_VERSION_NUMBER, symbols } from "../../ts/ffi/symbols.ts";
import { cudaDeviceCount, libraryVersion, MtcError, poolStats } from "../../ts/mod.ts";
import { checkLibraryStaysMapped } from "./mapping.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertEquals, assertSame, assertThrows, env, test } from "./harness.ts";

test("library: a missing file is a clear MtcError saying where it looked and how to build", () => {
  const e = assertThrows(() => loadLibrary("/nonexistent/dir/libmtc.so"), MtcError, "libmtc not found");
  assert(e.message.includes("/nonexistent/dir/libmtc.so"), e.message);
  assert(e.message.includes("npm run build:lib"), e.message);
  assert(e.message.includes("MTC_LIBRARY_PATH"), e.message);
  assertSame(e.code, "MTC_ERR_UNSUPPORTED");
});

test("library: a file that is not a library is rethrown with its cause", () => {
  const here = decodeURIComponent(new URL(import.meta.url).pathname);
  const e = assertThrows(() => loadLibrary(here), MtcError, `could not load libmtc from ${here}`);
  assert(e.cause !== undefined, "the runtime's load error is the cause");
  assert(e.message.includes("npm run build:lib"));
});

test("library: the local build path is at the repository root", () => {
  assert(localBuildPath().endsWith("/zig-out/lib/libmtc.so"), localBuildPath());
  assert(!localBuildPath().includes("/ts/"), localBuildPath());
});

test("library: the prebuilt folder is chosen by the runtime's CPU name (Bun's and Deno's)", () => {
  assertEquals(prebuiltTag("linux", "x64"), "linux-x64");
  assertEquals(prebuiltTag("linux", "x86_64"), "linux-x64");
  assertEquals(prebuiltTag("linux", "arm64"), "linux-arm64");
  assertEquals(prebuiltTag("linux", "aarch64"), "linux-arm64");
  assertEquals(prebuiltTag("linux", "ppc64"), "linux-ppc64");
  assertEquals([...PREBUILT_PLATFORMS], ["linux-x64", "linux-arm64"]);
  assert(PREBUILT_PLATFORMS.includes(platformTag()), `this machine, ${platformTag()}, has a prebuilt folder`);
});

test("library: loads, and its version matches the bindings", () => {
  checkLibraryStaysMapped();
  const lib = library();
  assertSame(Math.floor(lib.versionNumber / 10000), Math.floor(EXPECTED_VERSION_NUMBER / 10000));
  assertSame(libraryVersion(), lib.versionString);
  assert(/^\d+\.\d+\.\d+/.test(libraryVersion()), libraryVersion());
  if (env("MTC_LIBRARY_PATH") === undefined) assertSame(lib.path, localBuildPath());
  assertSame(library(), lib, "loaded once");
});

test("library: every status name agrees with mtc_status_name", () => {
  const sym = library().symbols;
  for (const [name, value] of Object.entries(Status)) {
    assertSame(sym.mtc_status_name(value), name);
    assertSame(statusName(value), name);
  }
  assertSame(sym.mtc_status_name(99), "MTC_UNKNOWN_STATUS");
  assertSame(statusName(99), "MTC_UNKNOWN_STATUS");
});

test("library: every symbol of the table is bound", () => {
  const sym = library().symbols as unknown as Record<string, unknown>;
  const missing: string[] = [];
  for (const [name, spec] of Object.entries(symbols)) {
    const { nonblocking, optional } = spec as { nonblocking?: boolean; optional?: boolean };
    if (nonblocking && currentBackend().runtime === "bun") assertSame(sym[name], undefined);
    else if (optional && sym[name] === undefined) missing.push(name);
    else assertSame(typeof sym[name], "function", name);
  }
  // The local build is complete, and so must the library under test be with
  // MTC_REQUIRE_ALL_SYMBOLS=1; an older one named by MTC_LIBRARY_PATH may lack some.
  if (env("MTC_REQUIRE_ALL_SYMBOLS") === "1" || library().path === localBuildPath()) assertEquals(missing, []);
  else if (missing.length > 0) console.log(`(libmtc lacks optional ${missing.join(", ")})`);
});

test("library: a library without an optional symbol still loads, without that entry", () => {
  const backend = currentBackend();
  const opened = backend.open(library().path, {
    mtc_version_number: { args: [], result: "u32" },
    mtc_definitely_missing_for_test: { args: ["i32"], result: "i32", optional: true },
  });
  const bound = opened.symbols as Record<string, unknown>;
  assertSame(typeof bound.mtc_version_number, "function");
  assertSame(bound.mtc_definitely_missing_for_test, undefined);
  assertSame(opened.functionAddress("mtc_definitely_missing_for_test"), undefined);
  // A missing required symbol still fails the whole load.
  assertThrows(() => backend.open(library().path, { mtc_definitely_missing_for_test: { args: [], result: "void" } }), Error);
});

test("library: a missing optional function is MTC_ERR_UNSUPPORTED naming it", () => {
  const e = assertThrows(() => requireSymbol("mtc_definitely_missing" as never, "tests"), MtcError, "mtc_definitely_missing");
  assertSame(e.code, "MTC_ERR_UNSUPPORTED");
});

test("ffi: pointerOf includes the byteOffset and copyFromAddress reads memory", () => {
  const backend = currentBackend();
  const base = new Uint8Array(64);
  for (let i = 0; i < 64; i++) base[i] = i;
  const sub = base.subarray(5, 13);
  assertSame(backend.pointerOf(sub) - backend.pointerOf(base), 5);
  const small = new Float64Array(2);
  assertSame(backend.pointerOf(new Float64Array(0)), 0);
  assert(backend.pointerOf(small) > 0);
  const out = new Uint8Array(8);
  backend.copyFromAddress(backend.pointerOf(sub), out);
  assertEquals(out, new Uint8Array([5, 6, 7, 8, 9, 10, 11, 12]));
});

test("info: cudaDeviceCount and poolStats", () => {
  const count = cudaDeviceCount();
  assert(Number.isInteger(count) && count >= 0);
  if (env("MTC_CUDA_DRIVER") === undefined && count === 0) console.log("(no CUDA driver: cudaDeviceCount() is 0)");
  const stats = poolStats();
  assertEquals(Object.keys(stats), [
    "stagingThreads",
    "plansLive",
    "blocksLive",
    "deviceBytesLive",
    "hostBytesLive",
    "pinnedBytesCached",
    "pinnedBytesInUse",
    "pinnedAllocations",
    "pinnedReuses",
    "pinnedLimitBytes",
    "pinnedStagingBytes",
    "pinnedOutputBytes",
    "pinnedHighWaterBytes",
    "pinnedLimitWaits",
    "pinnedHeldBytes",
    "pinnedHeldLimitBytes",
  ]);
  for (const v of Object.values(stats)) assert(Number.isInteger(v) && v >= 0);
  assert(stats.stagingThreads >= 1);
  assert(stats.pinnedLimitBytes >= 2 ** 20, `a pinned limit: ${stats.pinnedLimitBytes}`);
  assert(stats.pinnedHighWaterBytes <= stats.pinnedLimitBytes, "the high-water mark is within the limit");
});

test("errors: MtcError carries status, code, path and cause", () => {
  const cause = new Error("lower");
  const e = new MtcError(Status.MTC_ERR_CUDA, "copy failed", { path: "[3].cams_gt[2].depths", cause });
  assert(e instanceof Error);
  assertSame(e.name, "MtcError");
  assertSame(e.message, "[3].cams_gt[2].depths: copy failed");
  assertSame(e.code, "MTC_ERR_CUDA");
  assertSame(e.status, 7);
  assertSame(e.cause, cause);
  assertSame(new MtcError(2, "bad", { path: "" }).message, "(root): bad");
  assertSame(new MtcError(2, "bad").message, "bad");
  assertSame(new MtcError(2, "bad").path, undefined);
});

test("devices: without a CUDA driver, a CUDA target is a clear MtcError; host copies still work", async () => {
  // In a child that has no driver to load, whatever this process has.
  const child = new URL("./fixtures/no_driver_copy.ts", import.meta.url).pathname;
  const r = await runScript(child, [], { MTC_CUDA_DRIVER: "/nonexistent/libcuda.so.1" });
  assertSame(r.code, 0, r.stderr);
  assertEquals(r.stdout.trim().split("\n"), ["devices: 0", "cuda:0: MTC_ERR_NO_DRIVER", "cuda: MTC_ERR_NO_DRIVER", "cpu: the same array"]);
}, { timeout: 60_000 });
