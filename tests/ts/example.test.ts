// examples/example.ts and examples/quick_start.ts as a user runs them: their
// command line, and what they say and do where there is no CUDA device.
import { driverPath } from "./fake_driver.ts";
import { runScript, type ScriptResult } from "./fixtures/spawn.ts";
import { assert, assertSame, runner, test } from "./harness.ts";

const EXAMPLE = new URL("../../examples/example.ts", import.meta.url).pathname;
const QUICK_START = new URL("../../examples/quick_start.ts", import.meta.url).pathname;
const ARENA_LOADER = new URL("../../examples/arena_loader.ts", import.meta.url).pathname;
const LOADER = new URL("../../examples/loader.ts", import.meta.url).pathname;
const NO_DRIVER = { MTC_CUDA_DRIVER: "/nonexistent/libcuda.so.1" };

function shown(r: ScriptResult): string {
  return `code ${r.code}\nstdout: ${r.stdout.slice(-2000)}\nstderr: ${r.stderr.slice(-2000)}`;
}

test("example: --help prints the usage and exits 0", async () => {
  const r = await runScript(EXAMPLE, ["--help"], {});
  assertSame(r.code, 0, shown(r));
  assert(r.stdout.startsWith("usage: bun examples/example.ts [--runs N] [--quiet]"), shown(r));
  assert(r.stdout.includes("--runs N"), shown(r));
});

test("example: what it does not know is an error with the usage, exit 2, and nothing copied", async () => {
  const cases: [string[], string][] = [
    [["--run", "5"], "Unknown option '--run'"],
    [["5"], "Unexpected argument '5'"],
    [["--runs", "abc"], `--runs wants a number of copies from 1 to 1000000, not "abc"`],
    [["--runs=0"], `not "0"`],
    [["--runs"], "argument missing"],
    [["--quiet=yes"], "--quiet"],
  ];
  const results = await Promise.all(cases.map(([args]) => runScript(EXAMPLE, args, NO_DRIVER)));
  results.forEach((r, i) => {
    const [args, message] = cases[i]!;
    assertSame(r.code, 2, `${args.join(" ")}: ${shown(r)}`);
    assert(r.stderr.includes(message), `${args.join(" ")}: expected ${JSON.stringify(message)}: ${shown(r)}`);
    assert(r.stderr.includes("usage: "), `${args.join(" ")}: the usage follows: ${shown(r)}`);
    assertSame(r.stdout, "", `${args.join(" ")}: nothing else: ${shown(r)}`);
  });
});

test("example: without a CUDA driver it says why, copies to cpu and checks every tensor", async () => {
  const r = await runScript(EXAMPLE, [], NO_DRIVER);
  assertSame(r.code, 0, shown(r));
  assert(r.stdout.includes("No CUDA device (could not load the CUDA driver /nonexistent/libcuda.so.1: "), shown(r));
  assert(r.stdout.includes("Copied to cpu"), shown(r));
  assert(r.stdout.includes("every tensor matches its input"), shown(r));
});

test("example: --runs=N times N copies and names the runtime with its version", async () => {
  const r = await runScript(EXAMPLE, ["--runs=3", "--quiet"], NO_DRIVER);
  assertSame(r.code, 0, shown(r));
  assert(new RegExp(`example batch to cpu, 3 runs after 3 warm-up \\(${runner} \\d+\\.\\d+\\.\\d+`).test(r.stdout), shown(r));
  assert(r.stdout.includes("startCopy -> get()    median"), shown(r));
  assert(!r.stdout.includes("No CUDA device"), `--quiet prints only the timing: ${shown(r)}`);
});

test("quick start: without a CUDA driver it says why and copies to cpu", async () => {
  const host = await runScript(QUICK_START, [], NO_DRIVER);
  assertSame(host.code, 0, shown(host));
  assert(host.stdout.includes("no CUDA device (could not load the CUDA driver /nonexistent/libcuda.so.1: "), shown(host));
  assert(host.stdout.includes("cpu [ 30, 4 ] cam1"), shown(host));
});

test("quick start: with MTC_CUDA_DRIVER it copies to cuda:0", async () => {
  const emulated = await runScript(QUICK_START, [], {});
  assertSame(emulated.code, 0, shown(emulated));
  assertSame(emulated.stdout, "cuda:0 [ 30, 4 ] cam1\n", shown(emulated));
}, { skip: driverPath === undefined ? "no emulated driver (MTC_CUDA_DRIVER)" : undefined });

test("arena loader: two arenas in rotation to cuda:0, every label checked", async () => {
  const r = await runScript(ARENA_LOADER, ["--steps", "6"], { MTC_CUDA_DRIVER: driverPath! });
  assertSame(r.code, 0, shown(r));
  assert(r.stdout.includes("6 batches built in two pinned arenas and copied to cuda:0"), shown(r));
}, { skip: driverPath === undefined ? "no emulated driver (MTC_CUDA_DRIVER)" : undefined });

test("loader: two workers build and copy example batches to cuda:0, taken in order", async () => {
  const r = await runScript(LOADER, ["--batches", "6"], { MTC_CUDA_DRIVER: driverPath! });
  assertSame(r.code, 0, shown(r));
  assert(r.stdout.includes("6 example batches of 528 tensors built by 2 workers, copied to cuda:0 and taken in order"), shown(r));
}, { skip: driverPath === undefined ? "no emulated driver (MTC_CUDA_DRIVER)" : undefined });
