/**
 * Where libmtc is looked for, and what to say when it is in none of those
 * places. The places depend on how the bindings were loaded:
 *
 * - as a file (the npm package's dist/mod.js, or the checkout's
 *   ts/ffi/library.ts): the package's prebuilt library, the local build;
 * - inside a bundle of the app's (`bun build --outdir`, `deno bundle`,
 *   esbuild...): beside the bundle;
 * - inside a single-file executable (`bun build --compile`, `deno
 *   compile`): beside the executable, and the library the executable
 *   embeds (Bun: the package's Bun entry imports it as a file, so `bun
 *   build` embeds or copies it; Deno: the package's files are in the
 *   executable, where `Deno.dlopen` can open them).
 *
 * MTC_LIBRARY_PATH, when set, is the one place in every case.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { getEnv, platform, runtime } from "../base/runtime.ts";

// The npm build (tsup.config.ts) defines this as true: this module is then
// part of a dist/ bundle (mod.js, loader_worker.js, cli.js), one folder below the package root. Unset when the
// TypeScript sources run as they are (ts/ffi/, two folders below the root).
declare const __MTC_PACKAGED__: boolean | undefined;
const PACKAGED = typeof __MTC_PACKAGED__ !== "undefined" && __MTC_PACKAGED__ === true;

/**
 * Where the npm package's Bun entry (dist/bun.js, written by
 * tsup.config.ts) leaves the path of the libmtc it imported with
 * `with { type: "file" }`: the package's file, or the copy `bun build`
 * embedded in an executable or put beside a bundle.
 */
const BUN_ENTRY_KEY = Symbol.for("multi-tensor-copier.libmtc");

/** The shared library's file name on this platform. */
export function libraryFileName(): string {
  const os = platform();
  return os === "darwin" ? "libmtc.dylib" : os === "windows" ? "mtc.dll" : "libmtc.so";
}

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

/** How these bindings were loaded, as far as the lookup is concerned. */
export interface Placement {
  /** This module's URL. */
  readonly moduleUrl: string;
  /** True when this module is part of the npm package's dist/ (or a bundle of it). */
  readonly packaged: boolean;
  /** The running single-file executable's path, or undefined when this is no such executable. */
  readonly executable: string | undefined;
  /** The libmtc the package's Bun entry imported, or undefined. */
  readonly bunEntryLibrary: string | undefined;
}

/**
 * True for a module of `bun build --compile`: it lives in the executable's
 * own file system, /$bunfs/ (B:/~BUN/ on Windows), with no file of the
 * package's beside it.
 */
function inBunfs(moduleUrl: string): boolean {
  return /\/\$bunfs\/|\/~BUN\//.test(moduleUrl);
}

/** A single-file executable's own path, or undefined. */
function executablePath(moduleUrl: string): string | undefined {
  const g = globalThis as unknown as {
    Deno?: { build?: { standalone?: boolean }; execPath?(): string };
    process?: { execPath?: string };
  };
  try {
    if (runtime === "bun") return inBunfs(moduleUrl) ? g.process?.execPath : undefined;
    if (runtime === "deno") return g.Deno?.build?.standalone === true ? g.Deno.execPath?.() : undefined;
  } catch {
    // Deno.execPath needs --allow-read: without it, no such place.
  }
  return undefined;
}

/** How these bindings were loaded, from the runtime. */
export function currentPlacement(): Placement {
  const moduleUrl = import.meta.url;
  const left = (globalThis as Record<symbol, unknown>)[BUN_ENTRY_KEY];
  return {
    moduleUrl,
    packaged: PACKAGED,
    executable: executablePath(moduleUrl),
    bunEntryLibrary: typeof left === "string" && left !== "" ? left : undefined,
  };
}

/** One place to look for the library, and how it was chosen. */
export interface Candidate {
  path: string;
  source:
    | "explicit path"
    | "MTC_LIBRARY_PATH"
    | "library beside the executable"
    | "library bundled by Bun"
    | "library beside the bundle"
    | "packaged library"
    | "local build";
}

function folderOf(path: string): string {
  return path.slice(0, path.lastIndexOf("/") + 1);
}

/**
 * True when this module is inside a bundle of the app's: a file, but not
 * the file it was written into (the package's dist/mod.js, dist/cli.js, or
 * dist/loader_worker.js, which holds a copy of the library of its own; the
 * checkout's ts/ffi/lookup.ts).
 */
function inBundle(p: Placement): boolean {
  if (!p.moduleUrl.startsWith("file:")) return false;
  if (!p.packaged) return !p.moduleUrl.endsWith("/ts/ffi/lookup.ts");
  return !/\/dist\/(mod|loader_worker|cli)\.js$/.test(p.moduleUrl);
}

/**
 * Where the bindings' code lies when it is not a file of the package's or
 * of the checkout's: in a single-file executable (`bun build --compile`,
 * `deno compile`), in a bundle of the app's, or neither (undefined).
 */
export function bundling(p: Placement = currentPlacement()): "executable" | "bundle" | undefined {
  if (p.executable !== undefined || inBunfs(p.moduleUrl)) return "executable";
  return inBundle(p) ? "bundle" : undefined;
}

/** Where loadLibrary looks, in order; the first that exists wins. `env`: MTC_LIBRARY_PATH. */
export function candidates(path: string | undefined, p: Placement = currentPlacement(), env = getEnv("MTC_LIBRARY_PATH")): Candidate[] {
  if (path !== undefined) return [{ path, source: "explicit path" }];
  if (env !== undefined && env !== "") return [{ path: env, source: "MTC_LIBRARY_PATH" }];
  const name = libraryFileName();
  const found: Candidate[] = [];
  const add = (path: string | undefined, source: Candidate["source"]) => {
    if (path !== undefined && !found.some((c) => c.path === path)) found.push({ path, source });
  };
  if (p.executable !== undefined) add(folderOf(p.executable) + name, "library beside the executable");
  const bundle = inBunfs(p.moduleUrl) || (p.executable === undefined && inBundle(p));
  const root = new URL(p.packaged ? "../" : "../../", p.moduleUrl);
  const shipped = PREBUILT_PLATFORMS.includes(platformTag());
  const packaged = p.packaged && !bundle && shipped ? filePath(new URL(`prebuilt/${platformTag()}/${name}`, root)) : undefined;
  // The Bun entry's import is the linux-x64 library; unbundled, it is the packaged library itself.
  if (p.bunEntryLibrary !== undefined && platformTag() === "linux-x64") {
    // A bundle's copy is named relative to the bundle (`bun build --outdir`), not to the working directory.
    const relative = p.bunEntryLibrary.startsWith("./") || p.bunEntryLibrary.startsWith("../");
    const path = relative ? filePath(new URL(p.bunEntryLibrary, p.moduleUrl)) : p.bunEntryLibrary;
    if (path !== packaged) add(path, "library bundled by Bun");
  }
  if (inBunfs(p.moduleUrl)) return found; // no file of the package's is there
  if (bundle) {
    add(filePath(new URL(name, p.moduleUrl)), "library beside the bundle");
    return found;
  }
  // As files (in `deno compile`'s executable too, where the package's files are embedded at their paths).
  add(packaged, "packaged library");
  add(filePath(new URL(`zig-out/lib/${name}`, root)), "local build");
  // The sources as the npm package ships them (ts/, which its examples and
  // benches import): its prebuilt library, after a clone's own build.
  if (!p.packaged && shipped) add(filePath(new URL(`prebuilt/${platformTag()}/${name}`, root)), "packaged library");
  return found;
}

/** What to do about a missing or unloadable library, for this copy of the bindings. */
export function buildHint(p: Placement = currentPlacement()): string {
  const name = libraryFileName();
  if (p.executable !== undefined) {
    return `this is a single-file executable (bun build --compile, deno compile): put ${name} beside it, ` +
      `at ${folderOf(p.executable)}${name}, or set MTC_LIBRARY_PATH to a ${name} (docs/INSTALL.md, "Bundling and single-file executables")`;
  }
  if (inBundle(p)) {
    const beside = filePath(new URL(name, p.moduleUrl)) ?? name;
    return `this module is part of a bundle (${p.moduleUrl}): copy ${name} beside it, at ${beside}, or set MTC_LIBRARY_PATH ` +
      `to a ${name}, or keep the package out of the bundle (docs/INSTALL.md, "Bundling and single-file executables")`;
  }
  if (p.packaged) {
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

/** Why nothing was found, naming every place looked at. */
export function notFound(tried: readonly Candidate[], p: Placement = currentPlacement()): MtcError {
  let where: string;
  if (tried.length === 0) {
    where = `MTC_LIBRARY_PATH is not set, and this module was loaded from ${p.moduleUrl}, ` +
      "not from a file, so there is no library next to it";
  } else if (tried[0]!.source === "explicit path") {
    where = `looked for ${tried[0]!.path}, which does not exist`;
  } else if (tried[0]!.source === "MTC_LIBRARY_PATH") {
    where = `MTC_LIBRARY_PATH names ${tried[0]!.path}, which does not exist`;
  } else if (p.packaged && !PREBUILT_PLATFORMS.includes(platformTag())) {
    // The platform is the news, not the paths looked at.
    return new MtcError(Status.MTC_ERR_UNSUPPORTED, `libmtc not found: MTC_LIBRARY_PATH is not set, and ${buildHint(p)}`);
  } else {
    where = "MTC_LIBRARY_PATH is not set and there is " +
      tried.map((c) => `no ${c.source} at ${c.path}`).join(" and ");
  }
  return new MtcError(Status.MTC_ERR_UNSUPPORTED, `libmtc not found: ${where}; ${buildHint(p)}`);
}
