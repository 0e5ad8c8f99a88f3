// Node.js is not supported: importing the package there must stop at once
// with the message docs/TROUBLESHOOTING.md gives, not with whatever the
// first module-level line Node lacks throws. The package's entries are
// bundled as tsup.config.ts bundles them (esbuild, split into a shared
// chunk), and node imports them.
import { assert, note, test } from "./harness.ts";
import { runCommand } from "./fixtures/spawn.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const MESSAGE = "multi-tensor-copier runs on Bun or Deno (no FFI found)";

/** Whether `node` runs here. */
async function haveNode(): Promise<boolean> {
  try {
    return (await runCommand(["node", "--version"])).code === 0;
  } catch {
    return false; // not on PATH
  }
}

test("node: importing the npm entry or the worker script says the library runs on Bun or Deno", async () => {
  if (!(await haveNode())) {
    note("node: no node on PATH, nothing to check");
    return;
  }
  const out = `${ROOT}zig-out/node-test-${Math.random().toString(36).slice(2)}`;
  const built = await runCommand([
    `${ROOT}node_modules/.bin/esbuild`, `${ROOT}ts/npm.ts`, `${ROOT}ts/worker.ts`,
    "--bundle", "--format=esm", "--splitting", "--platform=neutral", "--target=esnext", "--keep-names",
    "--external:bun:ffi", "--define:__MTC_PACKAGED__=true", `--outdir=${out}`, "--log-level=error",
  ]);
  assert(built.code === 0, `esbuild failed: ${built.stderr}`);
  try {
    for (const entry of ["npm.js", "worker.js"]) {
      const r = await runCommand(["node", "--input-type=module", "-e", `import ${JSON.stringify(`${out}/${entry}`)};`]);
      assert(r.code !== 0, `node imported ${entry} without an error`);
      assert(r.stderr.includes(`MtcError: ${MESSAGE}`), `node, ${entry}: ${r.stderr}`);
      assert(r.stderr.includes("MTC_ERR_UNSUPPORTED"), `node, ${entry}: no code in ${r.stderr}`);
    }
  } finally {
    await runCommand(["rm", "-rf", out]); // (the tests run without write permission under Deno)
  }
});
