/**
 * Finds, opens and checks libmtc, once, on first use.
 *
 * Lookup order: the file named by MTC_LIBRARY_PATH; else, in the npm
 * package, the prebuilt library shipped next to the bundle
 * (prebuilt/<os>-<arch>/libmtc.so); else the local build
 * (zig-out/lib/libmtc.so at the package or repository root). Both are found
 * from this module's URL, so they need it to be a file: URL.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { envFlag, getEnv, platform, runtime } from "../base/runtime.ts";
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

// The npm build (tsup.config.ts) defines this as true: this module is then
// part of dist/mod.js, one folder below the package root. Unset when the
// TypeScript sources run as they are (ts/ffi/, two folders below the root).
declare const __MTC_PACKAGED__: boolean | undefined;
const PACKAGED = typeof __MTC_PACKAGED__ !== "undefined" && __MTC_PACKAGED__ === true;

/** The package (or repository) root, from this module's URL. */
function rootUrl(): URL {
  return new URL(PACKAGED ? "../" : "../../", import.meta.url);
}

/** The file path of a file: URL; undefined for any other scheme (https: from JSR, say). */
function filePath(url: URL): string | undefined {
  return url.protocol === "file:" ? decodeURIComponent(url.pathname) : undefined;
}

/**
 * The platforms the npm package ships a prebuilt libmtc for, each in
 * prebuilt/<platform>/ (glibc 2.28 or newer). linux-arm64 (Grace Hopper
 * hosts) is cross-built by Zig; its host path is tested under an emulator,
 * its GPU path has not run on a GPU.
 */
export const PREBUILT_PLATFORMS: readonly string[] = ["linux-x64", "linux-arm64"];

/**
 * "linux-x64", "linux-arm64", "darwin-arm64", ...: the folder of prebuilt/
 * for an OS and a CPU as the runtime names them (Bun's process.arch says
 * "x64" and "arm64", Deno's Deno.build.arch "x86_64" and "aarch64"); another
 * CPU keeps its runtime's name.
 *
 * @example
 * ```ts
 * prebuiltTag("linux", "aarch64"); // "linux-arm64"
 * ```
 */
export function prebuiltTag(os: string, arch: string): string {
  const name = arch === "x86_64" || arch === "x64" ? "x64" : arch === "aarch64" || arch === "arm64" ? "arm64" : arch;
  return `${os}-${name}`;
}

/** prebuiltTag for this machine: Deno.build.arch under Deno, process.arch under Bun. */
export function platformTag(): string {
  const g = globalThis as unknown as { Deno?: { build?: { arch?: string } }; process?: { arch?: string } };
  const arch = runtime === "deno" ? g.Deno?.build?.arch : g.process?.arch;
  return prebuiltTag(platform(), arch ?? "unknown");
}

/**
 * Where the npm package keeps its prebuilt library for this machine, or
 * undefined when this module is not the package's bundle (or not a file),
 * or the package has no library for this machine.
 */
export function packagedLibraryPath(): string | undefined {
  if (!PACKAGED || !PREBUILT_PLATFORMS.includes(platformTag())) return undefined;
  return filePath(new URL(`prebuilt/${platformTag()}/${libraryFileName()}`, rootUrl()));
}

/** Where the local build puts the library (`zig build` at the repository root). */
export function localBuildPath(): string {
  const url = new URL(`zig-out/lib/${libraryFileName()}`, rootUrl());
  return filePath(url) ?? url.href;
}

/** What to do about a missing or unloadable library, for this copy of the bindings. */
function buildHint(): string {
  if (PACKAGED) {
    const shipped = `${PREBUILT_PLATFORMS.join(" and ")} with glibc 2.28 or newer`;
    const tag = platformTag();
    if (!PREBUILT_PLATFORMS.includes(tag)) {
      return `this machine is ${tag}, for which the npm package has no libmtc (it ships ${shipped}); ` +
        "build libmtc from source for it and set MTC_LIBRARY_PATH to it";
    }
    return `the npm package ships libmtc for ${shipped} (this machine: ${tag}); ` +
      "elsewhere, build libmtc from source and set MTC_LIBRARY_PATH to it";
  }
  return "build it with `npm run build:lib` (or `.tools/zig build`), or set MTC_LIBRARY_PATH to a libmtc shared library";
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

/** One place to look for the library, and how it was chosen. */
interface Candidate {
  path: string;
  source: "explicit path" | "MTC_LIBRARY_PATH" | "packaged library" | "local build";
}

/** Where loadLibrary looks, in order; the first that exists wins. */
function candidates(path: string | undefined): Candidate[] {
  if (path !== undefined) return [{ path, source: "explicit path" }];
  const fromEnv = getEnv("MTC_LIBRARY_PATH");
  if (fromEnv !== undefined && fromEnv !== "") return [{ path: fromEnv, source: "MTC_LIBRARY_PATH" }];
  const found: Candidate[] = [];
  const packaged = packagedLibraryPath();
  if (packaged !== undefined) found.push({ path: packaged, source: "packaged library" });
  const local = filePath(new URL(`zig-out/lib/${libraryFileName()}`, rootUrl()));
  if (local !== undefined) found.push({ path: local, source: "local build" });
  return found;
}

/** Why nothing was found, naming every place looked at. */
function notFound(tried: Candidate[]): MtcError {
  let where: string;
  if (tried.length === 0) {
    where = `MTC_LIBRARY_PATH is not set, and this module was loaded from ${import.meta.url}, ` +
      "not from a file, so there is no library next to it";
  } else if (tried[0]!.source === "explicit path") {
    where = `looked for ${tried[0]!.path}, which does not exist`;
  } else if (tried[0]!.source === "MTC_LIBRARY_PATH") {
    where = `MTC_LIBRARY_PATH names ${tried[0]!.path}, which does not exist`;
  } else if (PACKAGED && !PREBUILT_PLATFORMS.includes(platformTag())) {
    // The platform is the news, not the paths looked at.
    return new MtcError(Status.MTC_ERR_UNSUPPORTED, `libmtc not found: MTC_LIBRARY_PATH is not set, and ${buildHint()}`);
  } else {
    where = "MTC_LIBRARY_PATH is not set and there is " +
      tried.map((c) => `no ${c.source} at ${c.path}`).join(" and ");
  }
  return new MtcError(Status.MTC_ERR_UNSUPPORTED, `libmtc not found: ${where}; ${buildHint()}`);
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
