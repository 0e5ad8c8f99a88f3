/**
 * Where a loader's workers find their script and the producer module, and
 * what to ship when a bundle or a single-file executable lacks one of them.
 *
 * - The npm package under Bun: its Bun entry (dist/bun.js) imports the
 *   worker script as a file, so `bun build` embeds it in an executable
 *   (`--compile`) or copies it beside a bundle (`--outdir`), as it does the
 *   library; the path it left is the script.
 * - Otherwise the script beside the module that holds the loader's code:
 *   the package's dist/loader_worker.js beside dist/mod.js (or beside an
 *   app's bundle, where it must be copied); from the sources, ts/worker.ts.
 * - Under Bun the workers load the libmtc this thread loaded
 *   (MTC_LIBRARY_PATH in their environment): a bundle's library has a name
 *   of Bun's making that only this thread's entry knows.
 *
 * In a bundle or an executable, a script or producer that is not there is
 * an MtcError at startLoader, saying what to ship; elsewhere a missing
 * producer is the first next()'s error, as before.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { runtime } from "../base/runtime.ts";
import { currentBackend, library } from "../ffi/library.ts";
import { bundling, currentPlacement, type Placement } from "../ffi/lookup.ts";
import { type LoaderWorker, newWorker } from "./loader_threads.ts";

/** Where the package's Bun entry leaves the path of the worker script it imported as a file. */
const BUN_ENTRY_KEY = Symbol.for("multi-tensor-copier.loader_worker");

const SHIP = 'docs/INSTALL.md, "Bundling and single-file executables"';

/** Where the loader's code runs from, as far as its files are concerned. */
export interface LoaderPlace {
  /** The library lookup's view: a file of the package's, a bundle, an executable. */
  readonly placement: Placement;
  /** The URL of the module that holds the loader's code (this one). */
  readonly moduleUrl: string;
  /** The worker script the package's Bun entry imported, or undefined. */
  readonly bunEntryScript: string | undefined;
}

/** What a loader's workers are started with. */
export interface LoaderFiles {
  /** The worker script. */
  readonly script: URL;
  /** The producer module's URL, as the workers import it. */
  readonly module: string;
}

/** This copy's place, from the runtime. */
export function currentLoaderPlace(): LoaderPlace {
  const left = (globalThis as Record<symbol, unknown>)[BUN_ENTRY_KEY];
  return {
    placement: currentPlacement(),
    moduleUrl: import.meta.url,
    bunEntryScript: typeof left === "string" && left !== "" ? left : undefined,
  };
}

function filePath(url: URL): string | undefined {
  return url.protocol === "file:" ? decodeURIComponent(url.pathname) : undefined;
}

/**
 * The worker script's URL, before anyone looked whether it is there. The
 * package's is dist/loader_worker.js; the sources' ts/worker.ts. Either
 * registers the library's exports first in the worker (ts/npm.ts), then
 * runs loader_worker.ts.
 */
export function workerScriptUrl(at: LoaderPlace): URL {
  if (at.bunEntryScript !== undefined) {
    // A bundle's copy is named relative to the bundle (`bun build --outdir`); an executable's is absolute.
    const relative = at.bunEntryScript.startsWith("./") || at.bunEntryScript.startsWith("../");
    return relative ? new URL(at.bunEntryScript, at.moduleUrl) : new URL(`file://${at.bunEntryScript}`);
  }
  return new URL(at.placement.packaged ? "./loader_worker.js" : "../worker.ts", at.moduleUrl);
}

/**
 * The worker script and the producer module for startLoader, or an
 * MtcError saying what to ship with a bundle or an executable that lacks
 * one. `exists`: true, false, or undefined where it cannot tell (Deno
 * without --allow-read), which counts as there. A producer `.ts` file that
 * is not there but has its `.js` beside it, as `bun build` names an entry
 * point, is that `.js`.
 */
export function loaderFiles(module: string, at: LoaderPlace = currentLoaderPlace(), exists: (path: string) => boolean | undefined = fileExists): LoaderFiles {
  const kind = bundling(at.placement);
  const script = workerScriptUrl(at);
  if (kind === undefined) return { script, module };
  const scriptPath = filePath(script);
  if (scriptPath !== undefined && exists(scriptPath) === false) throw noWorkerScript(kind, scriptPath, at);
  const url = new URL(module);
  const path = filePath(url);
  if (path === undefined || exists(path) !== false) return { script, module };
  const built = /\.[cm]?tsx?$/.test(path) ? path.replace(/\.[cm]?tsx?$/, ".js") : undefined;
  if (built !== undefined && exists(built) === true) return { script, module: new URL(`file://${built}`).href };
  throw noProducer(kind, path, built);
}

function noWorkerScript(kind: "executable" | "bundle", path: string, at: LoaderPlace): MtcError {
  const hint = kind === "executable"
    ? "this single-file executable does not hold the loader's worker script: `bun build --compile` embeds it " +
      'when the app imports the npm package by name ("multi-tensor-copier", whose Bun entry imports dist/loader_worker.js as a file)'
    : `this module is part of a bundle (${at.moduleUrl}): copy the npm package's dist/loader_worker.js to that path ` +
      '(`bun build` does it when the app imports the package by name), or keep the package out of the bundle';
  return new MtcError(Status.MTC_ERR_UNSUPPORTED, `startLoader: no loader worker script at ${path}; ${hint} (${SHIP})`);
}

function noProducer(kind: "executable" | "bundle", path: string, built: string | undefined): MtcError {
  const hint = kind === "executable"
    ? "this is a single-file executable: list the producer module among the entry points of `bun build --compile` " +
      "(`bun build --compile main.ts batches.ts --outfile app`), so that the executable holds it"
    : "this is a bundle: list the producer module among its entry points (`bun build main.ts batches.ts --outdir out " +
      "--target bun`), so that it is built beside the bundle, or copy it there";
  const also = built === undefined ? "" : ` (nor ${built})`;
  return new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, `startLoader: the producer module ${path} is not there${also}; ${hint} (${SHIP})`);
}

function fileExists(path: string): boolean | undefined {
  return currentBackend().fileExists(path);
}

/**
 * A new worker thread of a loader, running the worker script. Under Bun,
 * MTC_LIBRARY_PATH in its environment names the libmtc this thread loaded,
 * so that every thread uses that one library (Deno's workers share the
 * process's environment, and find the library as this thread did).
 */
export function newLoaderThread(at: LoaderPlace = currentLoaderPlace()): LoaderWorker {
  const script = workerScriptUrl(at);
  if (runtime !== "bun") return newWorker(script);
  const env: Record<string, string> = {};
  const own = (globalThis as unknown as { process: { env: Record<string, string | undefined> } }).process.env;
  for (const [name, value] of Object.entries(own)) if (value !== undefined) env[name] = value;
  return newWorker(script, { type: "module", env: { ...env, MTC_LIBRARY_PATH: library().path } });
}
