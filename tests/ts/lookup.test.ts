// Where libmtc is looked for (ts/ffi/lookup.ts) as the bindings are loaded:
// as files, inside a bundle of the app's, inside a single-file executable.
// The bundles themselves are built and run by tests/package/install_test.sh.
import { buildHint, bundling, candidates, localBuildPath, notFound, type Placement, platformTag } from "../../ts/ffi/lookup.ts";
import { MtcError } from "../../ts/mod.ts";
import { assert, assertEquals, assertSame, test } from "./harness.ts";

const LINUX_X64 = platformTag() === "linux-x64";
const SHIPPED = ["linux-x64", "linux-arm64"].includes(platformTag());

function placement(over: Partial<Placement>): Placement {
  return { moduleUrl: "file:///app/node_modules/multi-tensor-copier/dist/mod.js", packaged: true, executable: undefined, bunEntryLibrary: undefined, ...over };
}

function places(p: Placement, env?: string): string[] {
  return candidates(undefined, p, env).map((c) => `${c.source}: ${c.path}`);
}

test("lookup: MTC_LIBRARY_PATH, then an explicit path, are the only place wherever the bindings are", () => {
  const p = placement({ executable: "/srv/app", moduleUrl: "file:///$bunfs/root/app" });
  assertEquals(places(p, "/opt/libmtc.so"), ["MTC_LIBRARY_PATH: /opt/libmtc.so"]);
  assertEquals(candidates("/x/libmtc.so", p, "/opt/libmtc.so").map((c) => c.source), ["explicit path"]);
  assertEquals(places(p, "").length, 1, "an empty MTC_LIBRARY_PATH counts as unset");
});

test("lookup: the npm package as files: its prebuilt library, then a local build; the Bun entry's import is that same file", () => {
  const name = `prebuilt/${platformTag()}/libmtc.so`;
  const expected = [`packaged library: /app/node_modules/multi-tensor-copier/${name}`, "local build: /app/node_modules/multi-tensor-copier/zig-out/lib/libmtc.so"];
  assertEquals(places(placement({})), expected);
  assertEquals(places(placement({ bunEntryLibrary: `/app/node_modules/multi-tensor-copier/${name}` })), expected);
  // The loader's workers run the package's worker script, a whole copy of the library beside mod.js.
  assertEquals(places(placement({ moduleUrl: "file:///app/node_modules/multi-tensor-copier/dist/loader_worker.js" })), expected);
  // The package's command (the doctor) is another whole copy, beside them.
  assertEquals(places(placement({ moduleUrl: "file:///app/node_modules/multi-tensor-copier/dist/cli.js" })), expected);
});

test("lookup: the checkout's sources: the local build at the repository root, then a prebuilt library there", () => {
  const url = new URL("../../ts/ffi/lookup.ts", import.meta.url).href;
  const prebuilt = `packaged library: ${new URL(`../../prebuilt/${platformTag()}/libmtc.so`, import.meta.url).pathname}`;
  assertEquals(places(placement({ moduleUrl: url, packaged: false })), [`local build: ${localBuildPath()}`, ...(SHIPPED ? [prebuilt] : [])]);
  assert(buildHint(placement({ moduleUrl: url, packaged: false })).includes("npm run build:lib"));
  assertSame(bundling(placement({ moduleUrl: url, packaged: false })), undefined);
});

test("lookup: the sources the npm package ships (ts/, for its examples): its prebuilt library", () => {
  const url = "file:///app/node_modules/multi-tensor-copier/ts/ffi/lookup.ts";
  const expected = ["local build: /app/node_modules/multi-tensor-copier/zig-out/lib/libmtc.so"];
  if (SHIPPED) expected.push(`packaged library: /app/node_modules/multi-tensor-copier/prebuilt/${platformTag()}/libmtc.so`);
  assertEquals(places(placement({ moduleUrl: url, packaged: false })), expected);
});

test("lookup: bundling() tells the package's files from a bundle and an executable", () => {
  assertSame(bundling(placement({})), undefined);
  assertSame(bundling(placement({ moduleUrl: "file:///app/node_modules/multi-tensor-copier/dist/loader_worker.js" })), undefined);
  assertSame(bundling(placement({ moduleUrl: "file:///app/node_modules/multi-tensor-copier/dist/cli.js" })), undefined);
  assertSame(bundling(placement({ moduleUrl: "file:///srv/out/main.js" })), "bundle");
  assertSame(bundling(placement({ moduleUrl: "file:///$bunfs/root/app", executable: "/srv/bin/app" })), "executable");
  assertSame(bundling(placement({ moduleUrl: "https://jsr.io/@mtc/multi-tensor-copier/0.1.0/ts/ffi/lookup.ts", packaged: false })), undefined);
});

test("lookup: in a bundle of the app's, beside the bundle (and first what `bun build` copied there, named relative to the bundle)", () => {
  const bundle = placement({ moduleUrl: "file:///srv/out/main.js" });
  assertEquals(places(bundle), ["library beside the bundle: /srv/out/libmtc.so"]);
  const fromSources = placement({ moduleUrl: "file:///srv/out/main.js", packaged: false });
  assertEquals(places(fromSources), ["library beside the bundle: /srv/out/libmtc.so"]);
  if (LINUX_X64) {
    const bun = placement({ moduleUrl: "file:///srv/out/main.js", bunEntryLibrary: "./libmtc-67j0vcez.so" });
    assertEquals(places(bun), ["library bundled by Bun: /srv/out/libmtc-67j0vcez.so", "library beside the bundle: /srv/out/libmtc.so"]);
  }
  const e = notFound(candidates(undefined, bundle, undefined), bundle);
  assert(e instanceof MtcError);
  assertSame(e.code, "MTC_ERR_UNSUPPORTED");
  for (const text of ["no library beside the bundle at /srv/out/libmtc.so", "copy libmtc.so beside it", "MTC_LIBRARY_PATH", "keep the package out of the bundle"]) {
    assert(e.message.includes(text), `${JSON.stringify(text)} in: ${e.message}`);
  }
});

test("lookup: in `bun build --compile`'s executable, beside the executable first, then the library it embeds", () => {
  const compiled = placement({ moduleUrl: "file:///$bunfs/root/app", executable: "/srv/bin/app" });
  assertEquals(places(compiled), ["library beside the executable: /srv/bin/libmtc.so"]);
  if (LINUX_X64) {
    const embedded = { ...compiled, bunEntryLibrary: "/$bunfs/root/libmtc-67j0vcez.so" };
    assertEquals(places(embedded), ["library beside the executable: /srv/bin/libmtc.so", "library bundled by Bun: /$bunfs/root/libmtc-67j0vcez.so"]);
  }
  const e = notFound(candidates(undefined, compiled, undefined), compiled);
  for (const text of ["no library beside the executable at /srv/bin/libmtc.so", "single-file executable", "put libmtc.so beside it, at /srv/bin/libmtc.so", "MTC_LIBRARY_PATH"]) {
    assert(e.message.includes(text), `${JSON.stringify(text)} in: ${e.message}`);
  }
});

test("lookup: in `deno compile`'s executable, beside the executable, then the package's files it embeds", () => {
  const compiled = placement({ moduleUrl: "file:///tmp/deno-compile-app/node_modules/multi-tensor-copier/dist/mod.js", executable: "/srv/bin/app" });
  assertEquals(places(compiled), [
    "library beside the executable: /srv/bin/libmtc.so",
    `packaged library: /tmp/deno-compile-app/node_modules/multi-tensor-copier/prebuilt/${platformTag()}/libmtc.so`,
    "local build: /tmp/deno-compile-app/node_modules/multi-tensor-copier/zig-out/lib/libmtc.so",
  ]);
});

test("lookup: over https (JSR) there is no file to look at: MTC_LIBRARY_PATH is the way", () => {
  const remote = placement({ moduleUrl: "https://jsr.io/@mtc/multi-tensor-copier/0.1.0/ts/ffi/lookup.ts", packaged: false });
  assertEquals(places(remote), []);
  const e = notFound([], remote);
  assert(e.message.includes("MTC_LIBRARY_PATH is not set, and this module was loaded from https://jsr.io/"), e.message);
});
