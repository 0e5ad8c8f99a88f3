// The npm package's JavaScript, for Bun and Deno (node_modules or npm:
// specifiers), each file whole, importing nothing of the package's:
// dist/mod.js (ts/npm.ts: ts/mod.ts's exports, those of the first copy of
// this version in the realm), the loader's worker script
// dist/loader_worker.js (ts/worker.ts), and the example kernels' PTX
// dist/examples/kernel_ptx.js (examples/kernel_ptx.ts), and the package's
// command dist/cli.js (ts/cli.ts, the doctor), with declarations
// in dist/types/, and dist/bun.js, the entry Bun takes (the "bun" condition
// of package.json's exports). `npm run build` runs this and then puts the
// prebuilt libmtc.so of each platform into prebuilt/
// (scripts/build-prebuilt.sh).
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { defineConfig } from "tsup";

const TYPES_DIR = "dist/types";

/** Every .d.ts file under `dir`. */
function declarationFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return declarationFiles(path);
    return path.endsWith(".d.ts") ? [path] : [];
  });
}

/**
 * The sources import each other as "./x.ts" (Deno and Bun run them as they
 * are); declarations for the package must say "./x.js", which every
 * TypeScript resolution mode maps to x.d.ts. Doc comments are left alone.
 */
function rewriteSpecifiers(text: string): string {
  return text
    .split("\n")
    .map((line) =>
      /^\s*(\*|\/\/)/.test(line) ? line : line.replace(/(from\s+|import\()(["'])(\.\.?\/[^"']+)\.ts\2/g, "$1$2$3.js$2")
    )
    .join("\n");
}

/**
 * Declarations. TypeScript 7's `tsc` has no JavaScript API for tsup's own
 * `dts` step, so its command line emits them, one .d.ts per source file.
 */
function emitDeclarations(): void {
  execFileSync(
    "node_modules/.bin/tsc",
    [
      "--ignoreConfig",
      "--declaration",
      "--emitDeclarationOnly",
      "--allowImportingTsExtensions",
      "--strict",
      "--noImplicitOverride",
      "--verbatimModuleSyntax",
      "--skipLibCheck",
      "--target", "ESNext",
      "--module", "ESNext",
      "--moduleResolution", "bundler",
      "--lib", "ESNext",
      "--types", "bun-types",
      "--rootDir", "ts",
      "--outDir", TYPES_DIR,
      "ts/mod.ts",
    ],
    { stdio: "inherit" },
  );
  // The example kernels' PTX, for `multi-tensor-copier/examples/kernel_ptx`.
  execFileSync(
    "node_modules/.bin/tsc",
    ["--ignoreConfig", "--declaration", "--emitDeclarationOnly", "--strict", "--target", "ESNext", "--module", "ESNext",
      "--moduleResolution", "bundler", "--lib", "ESNext", "--outDir", `${TYPES_DIR}/examples`, "examples/kernel_ptx.ts"],
    { stdio: "inherit" },
  );
  for (const file of declarationFiles(TYPES_DIR)) {
    writeFileSync(file, rewriteSpecifiers(readFileSync(file, "utf8")));
  }
}

/**
 * dist/bun.js: dist/mod.js, plus imports of the prebuilt library and of the
 * loader's worker script as files, so that `bun build` carries them along:
 * `--compile` embeds them in the executable (where bun:ffi's dlopen opens
 * the library, and a Worker runs the script), `--outdir` copies them beside
 * the bundle; unbundled, the imports are the package's files. The paths go
 * to ts/ffi/lookup.ts and ts/thread/worker_script.ts through global symbols
 * (mod.js is evaluated first, but both are looked up only on first use).
 * The worker script can travel as a file because it is whole: it imports
 * nothing. Deno takes dist/mod.js: it cannot import a file that is no module.
 */
const BUN_ENTRY = `// The package's entry for Bun (written by tsup.config.ts): dist/mod.js, and
// libmtc and the loader's worker script imported as files, so that \`bun
// build\` embeds them in an executable (--compile) or copies them beside a
// bundle (--outdir).
import libmtc from "../prebuilt/linux-x64/libmtc.so" with { type: "file" };
import loaderWorker from "./loader_worker.js" with { type: "file" };
export * from "./mod.js";
// The first copy's files stay the ones (a second install's must not replace them).
globalThis[Symbol.for("multi-tensor-copier.libmtc")] ??= libmtc;
globalThis[Symbol.for("multi-tensor-copier.loader_worker")] ??= loaderWorker;
`;

export default defineConfig({
  // The loader's worker script is an entry beside mod.js, where
  // ts/thread/worker_script.ts looks for it (new URL("./loader_worker.js", import.meta.url)).
  // dist/cli.js is the package's command (package.json `bin`): the doctor.
  entry: { mod: "ts/npm.ts", loader_worker: "ts/worker.ts", cli: "ts/cli.ts", "examples/kernel_ptx": "examples/kernel_ptx.ts" },
  outDir: "dist",
  format: ["esm"],
  // Bun and Deno both run current JavaScript; nothing to lower.
  target: "esnext",
  platform: "neutral",
  bundle: true,
  // Each entry whole, the library in mod.js and again in loader_worker.js,
  // so that the worker script is one file a bundler can carry as it is. A
  // producer that imports the package in a worker still gets the classes
  // the worker copies with: the worker script registers its copy first
  // (ts/npm.ts, "One class identity" in docs/DECISIONS.md).
  splitting: false,
  // dist/mod.js.map: stack traces and debuggers show ts/, which the package
  // ships, so that the files and lines Deno's frames name exist.
  sourcemap: true,
  // Classes keep their names (DeviceTensor, not _DeviceTensor) for
  // constructor.name, stack traces and default inspection.
  keepNames: true,
  clean: true,
  dts: false,
  // bun:ffi is Bun's own module (reached through import.meta.require).
  external: ["bun:ffi"],
  // Tells ts/ffi/lookup.ts that it runs from dist/, so the package root is
  // one folder up and prebuilt/ is there.
  define: { __MTC_PACKAGED__: "true" },
  onSuccess: async () => {
    emitDeclarations();
    writeFileSync("dist/bun.js", BUN_ENTRY);
  },
});
