/**
 * Finds, opens and checks libmtc, once, on first use.
 *
 * Lookup order (lookup.ts): the file named by MTC_LIBRARY_PATH; else, in
 * the npm package, the prebuilt library shipped next to the bundle
 * (prebuilt/<os>-<arch>/libmtc.so); else the local build
 * (zig-out/lib/libmtc.so at the package or repository root). Both are found
 * from this module's URL, so they need it to be a file: URL. In a bundle of
 * the app's, or a single-file executable, other places come first.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { envFlag, runtime } from "../base/runtime.ts";
import type { FfiBackend } from "./backend.ts";
import { bunBackend } from "./bun.ts";
import { denoBackend } from "./deno.ts";
import { buildHint, candidates, notFound } from "./lookup.ts";
import { EXPECTED_VERSION_NUMBER, type NativeSymbols, type OptionalName, symbols as table } from "./symbols.ts";
import { traceSymbols } from "./trace.ts";

/** An opened, version-checked libmtc. */
export interface MtcLibrary {
  /** The file it was loaded from. */
  readonly path: string;
  /** Its functions, bound for this runtime (optional ones only where the library has them). */
  readonly symbols: NativeSymbols;
  /**
   * The C address of a function of the table (Bun), or undefined (Deno, or
   * a function the library lacks). For C callbacks, not for calls.
   */
  functionAddress(name: keyof typeof table): number | undefined;
  /** The runtime's FFI helpers (pointers of typed arrays, reading host memory). */
  readonly backend: FfiBackend;
  /** mtc_version_number(): MAJOR * 10000 + MINOR * 100 + PATCH. */
  readonly versionNumber: number;
  /** mtc_version_string(), e.g. "0.1.0". */
  readonly versionString: string;
}

/** The backend for the running runtime; MtcError (MTC_ERR_UNSUPPORTED) elsewhere. */
export function currentBackend(): FfiBackend {
  if (runtime === "bun") return bunBackend;
  if (runtime === "deno") return denoBackend;
  throw new MtcError(Status.MTC_ERR_UNSUPPORTED, "multi-tensor-copier runs on Bun or Deno (no FFI found)");
}

const DENO_FLAGS = "run deno with --allow-ffi, --allow-env and --allow-read (the last two let MTC_LIBRARY_PATH and the lookup work)";

/**
 * Deno: why the FFI permission these bindings need is missing, or
 * undefined. They need it unscoped: `--allow-ffi=<file>` lets Deno open the
 * library but not read the C strings and pointers it returns, which failed
 * at the first call with a bare NotCapable.
 */
function denoPermissionProblem(path: string): string | undefined {
  if (runtime !== "deno") return undefined;
  type Query = (d: { name: "ffi"; path?: string }) => { state: string };
  const query = (globalThis as unknown as { Deno?: { permissions?: { querySync?: Query } } }).Deno?.permissions?.querySync;
  if (query === undefined || query({ name: "ffi" }).state === "granted") return undefined;
  if (query({ name: "ffi", path }).state === "granted") {
    return `Deno's FFI permission covers only ${path}, but the bindings also read the C strings and pointers ` +
      `libmtc returns, which needs it unscoped: ${DENO_FLAGS}, with no path after --allow-ffi`;
  }
  return `Deno's FFI permission is not granted: ${DENO_FLAGS}`;
}

/** The hint for a load error: Deno's missing permission, or how to get a library. */
function loadHint(cause: unknown): string {
  const name = (cause as { name?: string } | null)?.name;
  if (runtime === "deno" && (name === "NotCapable" || name === "PermissionDenied")) return DENO_FLAGS;
  return buildHint();
}

function versionText(n: number): string {
  return `${Math.floor(n / 10000)}.${Math.floor(n / 100) % 100}.${n % 100}`;
}

/**
 * Throws MtcError (MTC_ERR_UNSUPPORTED) unless a library of version
 * `found` (mtc_version_number) serves bindings written for `expected`:
 * the same major version, and below 1.0 the same minor version too (0.x
 * minor releases may change the ABI).
 *
 * @example
 * ```ts
 * checkLibraryVersion(100, "/opt/libmtc.so"); // 0.1.0: fine for 0.1 bindings
 * ```
 */
export function checkLibraryVersion(found: number, path: string, expected: number = EXPECTED_VERSION_NUMBER): void {
  const major = Math.floor(expected / 10000);
  const minor = Math.floor(expected / 100) % 100;
  const series = major === 0 ? `0.${minor}.x` : `${major}.x`;
  const same = Math.floor(found / 10000) === major && (major !== 0 || Math.floor(found / 100) % 100 === minor);
  if (!Number.isInteger(found) || !same) {
    throw new MtcError(
      Status.MTC_ERR_UNSUPPORTED,
      `libmtc at ${path} is version ${versionText(found)}, but these bindings need ${series} ` +
        `(written for ${versionText(expected)}); rebuild the library or update the bindings`,
    );
  }
}

/**
 * Opens libmtc from `path` (or, without one, from MTC_LIBRARY_PATH, the
 * npm package's prebuilt library or the local build) and checks its
 * version before binding anything else, so that a library of another
 * version is reported as such. Not cached: use {@link library}.
 * Throws MtcError (MTC_ERR_UNSUPPORTED) saying where it looked, with the
 * runtime's load error as `cause`.
 *
 * @example
 * ```ts
 * const lib = loadLibrary("/opt/mtc/lib/libmtc.so");
 * console.log(lib.versionString);
 * ```
 */
export function loadLibrary(path?: string): MtcLibrary {
  const backend = currentBackend();
  const tried = candidates(path);
  // A file that cannot be checked (fileExists undefined) is tried anyway.
  const chosen = tried.find((c) => backend.fileExists(c.path) !== false);
  if (chosen === undefined) throw notFound(tried);
  const { source } = chosen;
  path = chosen.path;
  const loadError = (cause: unknown): MtcError => {
    const why = cause instanceof Error ? cause.message : String(cause);
    return new MtcError(
      Status.MTC_ERR_UNSUPPORTED,
      `could not load libmtc from ${path} (${source}): ${why}; ${loadHint(cause)}`,
      { cause },
    );
  };
  const denied = denoPermissionProblem(path);
  if (denied !== undefined) throw new MtcError(Status.MTC_ERR_UNSUPPORTED, `cannot use libmtc at ${path} (${source}): ${denied}`);
  // The version first, through a table of one function: a library of
  // another version may lack functions these bindings need.
  let probe: ReturnType<FfiBackend["open"]>;
  try {
    probe = backend.open(path, { mtc_version_number: table.mtc_version_number });
  } catch (cause) {
    throw loadError(cause);
  }
  const versionNumber = Number((probe.symbols.mtc_version_number as () => number)());
  let symbols: NativeSymbols;
  let functionAddress: MtcLibrary["functionAddress"];
  try {
    checkLibraryVersion(versionNumber, path);
    const opened = backend.open(path, table);
    symbols = opened.symbols as unknown as NativeSymbols;
    functionAddress = (name) => opened.functionAddress(name);
  } catch (cause) {
    throw cause instanceof MtcError ? cause : loadError(cause);
  } finally {
    probe.close(); // the full table holds its own reference
  }
  if (envFlag("MTC_TRACE_FFI") === true) symbols = traceSymbols(symbols);
  return { path, symbols, functionAddress, backend, versionNumber, versionString: symbols.mtc_version_string() };
}

let loaded: MtcLibrary | undefined;

/** The process-wide libmtc, loaded synchronously on first use. */
export function library(): MtcLibrary {
  return (loaded ??= loadLibrary());
}

/**
 * An optional function of the loaded libmtc (one added after 0.1.0), or
 * MtcError (MTC_ERR_UNSUPPORTED) saying that this build lacks it and what
 * for.
 *
 * @example
 * ```ts
 * const create = requireSymbol("mtc_stream_create", "streams");
 * ```
 */
export function requireSymbol<K extends OptionalName>(name: K, feature: string): NonNullable<NativeSymbols[K]> {
  const lib = library();
  const fn = lib.symbols[name];
  if (fn === undefined) {
    throw new MtcError(
      Status.MTC_ERR_UNSUPPORTED,
      `${feature} need ${name}, which the libmtc at ${lib.path} (version ${lib.versionString}) does not export; rebuild it`,
    );
  }
  return fn as NonNullable<NativeSymbols[K]>;
}
