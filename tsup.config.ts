// The npm package's JavaScript: ts/mod.ts bundled into one ES module,
// dist/mod.js, for Bun and Deno (node_modules or npm: specifiers), with
// declarations in dist/types/. `npm run build` runs this and then puts the
// prebuilt libmtc.so of each platform into prebuilt/ (scripts/build-prebuilt.sh).
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
  for (const file of declarationFiles(TYPES_DIR)) {
    writeFileSync(file, rewriteSpecifiers(readFileSync(file, "utf8")));
  }
}

export default defineConfig({
  entry: { mod: "ts/mod.ts" },
  outDir: "dist",
  format: ["esm"],
  // Bun and Deno both run current JavaScript; nothing to lower.
  target: "esnext",
  platform: "neutral",
  bundle: true,
  splitting: false,
  // dist/mod.js.map (sources inlined): stack traces and debuggers show ts/.
  sourcemap: true,
  // Classes keep their names (DeviceTensor, not _DeviceTensor) for
  // constructor.name, stack traces and default inspection.
  keepNames: true,
  clean: true,
  dts: false,
  // bun:ffi is Bun's own module (reached through import.meta.require).
  external: ["bun:ffi"],
  // Tells ts/ffi/library.ts that it runs from dist/mod.js, so the package
  // root is one folder up and prebuilt/ is there.
  define: { __MTC_PACKAGED__: "true" },
  onSuccess: async () => emitDeclarations(),
});
