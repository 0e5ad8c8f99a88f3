// Where a loader's workers find their script and the producer module
// (ts/thread/worker_script.ts), as the library is loaded: the package's
// files, the sources, a bundle of the app's, a single-file executable; and
// what startLoader says a bundle or an executable lacks. The bundles and
// executables themselves are built and run by tests/package/install_test.sh.
import type { Placement } from "../../ts/ffi/lookup.ts";
import { loaderFiles, type LoaderPlace, workerScriptUrl } from "../../ts/thread/worker_script.ts";
import { MtcError } from "../../ts/mod.ts";
import { assert, assertSame, assertThrows, test } from "./harness.ts";

const PACKAGE = "file:///app/node_modules/multi-tensor-copier/dist/mod.js";

function place(moduleUrl: string, over: Partial<Placement> = {}, bunEntryScript?: string): LoaderPlace {
  const placement: Placement = { moduleUrl, packaged: true, executable: undefined, bunEntryLibrary: undefined, ...over };
  return { placement, moduleUrl, bunEntryScript };
}

/** A file system holding exactly `files`. */
function holding(...files: string[]): (path: string) => boolean {
  return (path) => files.includes(path);
}

test("worker script: the package's dist/loader_worker.js beside dist/mod.js, or what its Bun entry imported; the sources' ts/worker.ts", () => {
  assertSame(workerScriptUrl(place(PACKAGE)).href, "file:///app/node_modules/multi-tensor-copier/dist/loader_worker.js");
  const bun = "/app/node_modules/multi-tensor-copier/dist/loader_worker.js";
  assertSame(workerScriptUrl(place(PACKAGE, {}, bun)).href, `file://${bun}`);
  assertSame(workerScriptUrl(place("file:///srv/out/main.js", {}, "./loader_worker-1a2b3c4d.js")).href, "file:///srv/out/loader_worker-1a2b3c4d.js");
  assertSame(workerScriptUrl(place("file:///$bunfs/root/app", {}, "/$bunfs/root/loader_worker-1a2b3c4d.js")).href, "file:///$bunfs/root/loader_worker-1a2b3c4d.js");
  assertSame(workerScriptUrl(place("file:///repo/ts/thread/worker_script.ts", { packaged: false })).href, "file:///repo/ts/worker.ts");
});

test("worker script: as the package's files nothing is looked at; a missing producer is the first next()'s error, as before", () => {
  const files = loaderFiles("file:///app/batches.ts", place(PACKAGE), () => {
    throw new Error("looked at a file");
  });
  assertSame(files.module, "file:///app/batches.ts");
  assertSame(files.script.href, "file:///app/node_modules/multi-tensor-copier/dist/loader_worker.js");
});

test("worker script: in a bundle, the script and the producer must be there; the producer's .js, as bun build names it, stands for its .ts", () => {
  const bundle = place("file:///srv/out/main.js", {}, "./loader_worker-1a2b3c4d.js");
  const script = "/srv/out/loader_worker-1a2b3c4d.js";
  const built = loaderFiles("file:///srv/out/batches.ts", bundle, holding(script, "/srv/out/batches.js"));
  assertSame(built.module, "file:///srv/out/batches.js");
  assertSame(loaderFiles("file:///srv/out/batches.ts", bundle, holding(script, "/srv/out/batches.ts")).module, "file:///srv/out/batches.ts");
  // What cannot be looked at (Deno without --allow-read) counts as there.
  assertSame(loaderFiles("file:///srv/out/batches.ts", bundle, () => undefined).module, "file:///srv/out/batches.ts");
  // A producer over https is imported as it is.
  assertSame(loaderFiles("https://example.com/batches.ts", bundle, holding(script)).module, "https://example.com/batches.ts");

  const noScript = assertThrows(() => loaderFiles("file:///srv/out/batches.js", bundle, holding("/srv/out/batches.js")), MtcError);
  assertSame(noScript.code, "MTC_ERR_UNSUPPORTED");
  for (const text of [`no loader worker script at ${script}`, "part of a bundle (file:///srv/out/main.js)", "dist/loader_worker.js", "keep the package out of the bundle", "docs/INSTALL.md"]) {
    assert(noScript.message.includes(text), `${JSON.stringify(text)} in: ${noScript.message}`);
  }
  const noProducer = assertThrows(() => loaderFiles("file:///srv/out/batches.ts", bundle, holding(script)), MtcError);
  assertSame(noProducer.code, "MTC_ERR_INVALID_ARGUMENT");
  for (const text of ["the producer module /srv/out/batches.ts is not there (nor /srv/out/batches.js)", "bun build main.ts batches.ts --outdir out", "docs/INSTALL.md"]) {
    assert(noProducer.message.includes(text), `${JSON.stringify(text)} in: ${noProducer.message}`);
  }
});

test("worker script: in a single-file executable, one built without the package's Bun entry says to import the package by name", () => {
  const compiled = place("file:///$bunfs/root/app", { executable: "/srv/bin/app" });
  const e = assertThrows(() => loaderFiles("file:///$bunfs/root/batches.ts", compiled, holding("/$bunfs/root/batches.js")), MtcError);
  for (const text of ["no loader worker script at /$bunfs/root/loader_worker.js", "single-file executable", 'imports the npm package by name ("multi-tensor-copier"']) {
    assert(e.message.includes(text), `${JSON.stringify(text)} in: ${e.message}`);
  }
  const embedded = place("file:///$bunfs/root/app", { executable: "/srv/bin/app" }, "/$bunfs/root/loader_worker-1a2b3c4d.js");
  const fs = holding("/$bunfs/root/loader_worker-1a2b3c4d.js", "/$bunfs/root/batches.js");
  assertSame(loaderFiles("file:///$bunfs/root/batches.ts", embedded, fs).module, "file:///$bunfs/root/batches.js");
  const missing = assertThrows(() => loaderFiles("file:///$bunfs/root/other.ts", embedded, fs), MtcError);
  assert(missing.message.includes("list the producer module among the entry points of `bun build --compile`"), missing.message);
});
