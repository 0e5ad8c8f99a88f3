// The emulated CUDA driver as users get it (issue 26, item 14):
// MTC_CUDA_DRIVER=emulated loads the one next to libmtc (the npm package's
// libcuda-emulated.so, a build's libfakecuda.so), else the one next to the
// running program (tests/package/bundles.sh: a single-file executable's
// folder), and its JIT refuses PTX a
// real driver would refuse for its structure.
import { MtcError, Module } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertSame, assertThrows, runner, test } from "./harness.ts";

const child = new URL("./fixtures/emulated_child.ts", import.meta.url).pathname;

test("emulated driver: MTC_CUDA_DRIVER=emulated finds it next to libmtc", async () => {
  const result = await runScript(child, [], { MTC_CUDA_DRIVER: "emulated", FAKE_CUDA_DEVICE_COUNT: "3" });
  assertSame(result.code, 0, result.stderr);
  assertSame(result.stdout.trim(), "emulated: 3 1,2,3");
}, { skip: skipWithoutDriver, timeout: 60_000 });

// Copies libmtc into a folder of its own: Bun only (deno test runs without --allow-write;
// the lookup is libmtc's own C, the same under either runtime).
test("emulated driver: where libmtc has none beside it, the reason says so", async () => {
  const fs = await import("node:fs");
  const dir = fs.mkdtempSync("/tmp/mtc-lonely-");
  try {
    fs.copyFileSync(new URL("../../zig-out/lib/libmtc.so", import.meta.url).pathname, `${dir}/libmtc.so`);
    const result = await runScript(child, [], { MTC_CUDA_DRIVER: "emulated", MTC_LIBRARY_PATH: `${dir}/libmtc.so` });
    assertSame(result.code, 0, result.stderr);
    // Then beside the running program (a single-file executable's folder; here the runtime's), and what to ship.
    const program = fs.realpathSync((globalThis as unknown as { process: { execPath: string } }).process.execPath);
    assertSame(
      result.stdout.trim(),
      `no cuda: MTC_CUDA_DRIVER=emulated: no emulated driver (libcuda-emulated.so or libfakecuda.so) next to libmtc in ${dir}/ ` +
        `or next to the program in ${program.slice(0, program.lastIndexOf("/") + 1)}; put libcuda-emulated.so (the npm package's ` +
        "prebuilt/<platform>/libcuda-emulated.so) in one of those folders, or set MTC_CUDA_DRIVER to its path",
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, { skip: skipWithoutDriver ?? (runner === "deno" ? "deno test runs without --allow-write" : undefined), timeout: 60_000 });

test("emulated driver: PTX without the structure a real JIT needs is refused", () => {
  const entry = ".visible .entry k(.param .u32 n) { ret; }\n";
  for (const [ptx, why] of [
    [`garbage\n.version 8.0\n.target sm_90\n${entry}`, "must begin with a .version directive"],
    [`.version 8\n.target sm_90\n${entry}`, ".version needs a version number"],
    [`.version 8.0\n${entry}.target sm_90\n`, "must be followed by a .target directive"],
    [".version 8.0\n.target sm_90\n.address_size 64\n", "no .entry directive"],
    [`.version 8.0\n.target sm_90\n${entry}}`, "a '}' closes no '{'"],
    [`.version 8.0\n.target sm_90\n.visible .entry k() { {\n`, "a '{' is never closed"],
  ]) {
    const e = assertThrows(() => Module.load(ptx!, "cuda:0"), MtcError, "CUDA_ERROR_INVALID_PTX");
    assert(e.message.includes(why!), `${why}: ${e.message}`);
  }
  // Comments before .version are fine; a name the module lacks is CUDA_ERROR_NOT_FOUND.
  using module = Module.load(`// made by hand\n/* for a test */\n.version 8.0\n.target sm_90\n${entry}`, "cuda:0");
  assertThrows(() => module.function("nope", []), MtcError, "CUDA_ERROR_NOT_FOUND");
}, { skip: skipWithoutDriver });
