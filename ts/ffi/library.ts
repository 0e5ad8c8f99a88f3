/**
 * Finds, opens and checks libmtc, once, on first use.
 *
 * Lookup order: the file named by MTC_LIBRARY_PATH, else the local build
 * (zig-out/lib/libmtc.so at the repository root, found from this file's URL).
 *
 * @module
 */

import { MtcError, Status } from "../errors.ts";
import { getEnv, platform, runtime } from "../runtime.ts";
import type { FfiBackend } from "./backend.ts";
import { bunBackend } from "./bun.ts";
import { denoBackend } from "./deno.ts";
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

/** The shared library's file name on this platform. */
export function libraryFileName(): string {
  const os = platform();
  return os === "darwin" ? "libmtc.dylib" : os === "windows" ? "mtc.dll" : "libmtc.so";
}

/** Where the local build puts the library (`zig build` at the repository root). */
export function localBuildPath(): string {
  const url = new URL(`../../zig-out/lib/${libraryFileName()}`, import.meta.url);
  return decodeURIComponent(url.pathname);
}

const BUILD_HINT = "build it with `npm run build:lib` (or `.tools/zig build`), or set MTC_LIBRARY_PATH to a libmtc shared library";

function versionText(n: number): string {
  return `${Math.floor(n / 10000)}.${Math.floor(n / 100) % 100}.${n % 100}`;
}

/**
 * Opens libmtc from `path` (or, without one, from MTC_LIBRARY_PATH or the
 * local build) and checks its version. Not cached: use {@link library}.
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
  let source: string;
  if (path !== undefined) {
    source = "explicit path";
  } else {
    const fromEnv = getEnv("MTC_LIBRARY_PATH");
    if (fromEnv !== undefined && fromEnv !== "") {
      path = fromEnv;
      source = "MTC_LIBRARY_PATH";
    } else {
      path = localBuildPath();
      source = "local build";
    }
  }
  const exists = backend.fileExists(path);
  if (exists === false) {
    const where = source === "local build"
      ? `MTC_LIBRARY_PATH is not set and there is no local build at ${path}`
      : `${source === "MTC_LIBRARY_PATH" ? "MTC_LIBRARY_PATH names" : "looked for"} ${path}, which does not exist`;
    throw new MtcError(Status.MTC_ERR_UNSUPPORTED, `libmtc not found: ${where}; ${BUILD_HINT}`);
  }
  let symbols: NativeSymbols;
  let functionAddress: MtcLibrary["functionAddress"];
  try {
    const opened = backend.open(path, table);
    symbols = opened.symbols as unknown as NativeSymbols;
    functionAddress = (name) => opened.functionAddress(name);
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new MtcError(
      Status.MTC_ERR_UNSUPPORTED,
      `could not load libmtc from ${path} (${source}): ${why}; ${BUILD_HINT}`,
      { cause },
    );
  }
  const versionNumber = symbols.mtc_version_number();
  const expectedMajor = Math.floor(EXPECTED_VERSION_NUMBER / 10000);
  if (Math.floor(versionNumber / 10000) !== expectedMajor) {
    throw new MtcError(
      Status.MTC_ERR_UNSUPPORTED,
      `libmtc at ${path} is version ${versionText(versionNumber)}, but these bindings need ${expectedMajor}.x ` +
        `(written for ${versionText(EXPECTED_VERSION_NUMBER)}); rebuild the library or update the bindings`,
    );
  }
  if (getEnv("MTC_TRACE_FFI") === "1") symbols = traceSymbols(symbols);
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
