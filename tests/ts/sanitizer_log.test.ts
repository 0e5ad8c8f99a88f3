// The sanitizer mode's log parser (scripts/sanitizer_log.ts), which judges
// compute-sanitizer's logs on the GPU host: its hand-written sample logs,
// the allow-list it reads, and its command line. Needs no GPU.
import { readdirSync, readFileSync } from "node:fs";
import { baseApiName, judge, parseAllowList, readLog, selfTest } from "../../scripts/sanitizer_log.ts";
import { SAMPLES } from "../../scripts/sanitizer_samples.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const SCRIPT = new URL("../../scripts/sanitizer_log.ts", import.meta.url).pathname;
const ALLOW_FILE = new URL("../../scripts/sanitizer-allow.txt", import.meta.url).pathname;
const FIXTURE = new URL("./fixtures/sanitizer_memcheck.txt", import.meta.url).pathname;
const allow = parseAllowList(readFileSync(ALLOW_FILE, "utf8"));

test("sanitizer log: every sample log is judged as its sample says", () => {
  assertEquals(selfTest(allow), []);
  assert(SAMPLES.some((s) => s.ok) && SAMPLES.some((s) => !s.ok), "clean and failing samples");
});

test("sanitizer log: the allow-list parses, and each entry names a run that exists", () => {
  assert(allow.length > 0, "entries");
  const files = readdirSync(new URL("../gpu/", import.meta.url).pathname);
  for (const a of allow) {
    const file = a.runs.match(/^[^:]*:gpu\/(.+)$/)?.[1];
    if (file !== undefined && !file.includes("*")) assert(files.includes(file), `line ${a.line}: tests/gpu/${file} does not exist`);
    assert(/^(\*|memcheck|racecheck)(:|$)/.test(a.runs), `line ${a.line}: runs ${a.runs} names no tool`);
  }
});

test("sanitizer log: a malformed allow-list line is refused with its number", () => {
  assertThrows(() => parseAllowList("# fine\ncuEventQuery CUDA_ERROR_NOT_READY *\ncuEventQuery NOT_READY *\n"), Error, "allow-list line 3");
  assertThrows(() => parseAllowList("cuEventQuery CUDA_ERROR_NOT_READY\n"), Error, "allow-list line 1");
  assertThrows(() => parseAllowList("EventQuery CUDA_ERROR_NOT_READY *\n"), Error, "line 1");
  assertEquals(parseAllowList("\n  # only comments\n\n"), []);
});

test("sanitizer log: versioned and per-thread API names match their base name", () => {
  assertSame(baseApiName("cuMemAlloc_v2"), "cuMemAlloc");
  assertSame(baseApiName("cuLaunchKernel_ptsz"), "cuLaunchKernel");
  assertSame(baseApiName("cuMemcpyHtoDAsync_v2_ptsz"), "cuMemcpyHtoDAsync");
  assertSame(baseApiName("cuEventQuery"), "cuEventQuery");
});

test("sanitizer log: an allowed API error counts in every run its entry does not name", () => {
  const log = readFileSync(FIXTURE, "utf8");
  const report = readLog(log);
  assertSame(report.errorsReported, 4);
  assertSame(report.errorSummaries, 2);
  assertSame(report.apiErrors.length, 4);
  const inKernels = judge(report, { tool: "memcheck", run: "memcheck:gpu/kernels.test.ts", exitCode: 0 }, allow);
  assert(inKernels.ok, inKernels.line);
  assertSame(inKernels.counted, 0);
  const elsewhere = judge(report, { tool: "memcheck", run: "memcheck:gpu/gpu.test.ts", exitCode: 0 }, allow);
  assert(!elsewhere.ok, elsewhere.line);
  assertSame(elsewhere.counted, 4);
  assert(elsewhere.line.includes("cuLaunchKernel CUDA_ERROR_INVALID_VALUE"), elsewhere.line);
});

test("sanitizer log: the command line prints one line and exits 0, 1 or 2", async () => {
  const clean = await runScript(SCRIPT, ["--tool", "memcheck", "--run", "memcheck:gpu/kernels.test.ts", "--exit", "0", "--seconds", "7", FIXTURE], {});
  assertSame(clean.code, 0, clean.stdout + clean.stderr);
  assertSame(
    clean.stdout.trim(),
    "sanitize memcheck:gpu/kernels.test.ts: exit 0, 7 s; errors 0 counted, 4 expected ignored (cuModuleLoadDataEx CUDA_ERROR_INVALID_IMAGE ×1, " +
      "cuModuleLoadDataEx CUDA_ERROR_INVALID_PTX ×1, cuModuleGetFunction CUDA_ERROR_NOT_FOUND ×1, cuLaunchKernel CUDA_ERROR_INVALID_VALUE ×1); hazards -: ok",
  );
  const failed = await runScript(SCRIPT, ["--tool", "memcheck", "--run", "memcheck:c/test_device", "--exit", "0", FIXTURE], {});
  assertSame(failed.code, 1, failed.stdout + failed.stderr);
  assert(failed.stdout.includes("errors 4 counted") && failed.stdout.includes(": FAILED: 4 errors: "), failed.stdout);
  const missing = await runScript(SCRIPT, ["--tool", "racecheck", "--run", "racecheck:c/test_into", "--exit", "0", "--timed-out", "/nonexistent.log"], {});
  assertSame(missing.code, 1, missing.stdout + missing.stderr);
  assert(missing.stdout.includes("exit timeout") && missing.stdout.includes("FAILED: timed out"), missing.stdout);
  const usage = await runScript(SCRIPT, ["--tool", "memcheck", FIXTURE], {});
  assertSame(usage.code, 2, usage.stdout + usage.stderr);
  const self = await runScript(SCRIPT, ["--selftest"], {});
  assertSame(self.code, 0, self.stdout + self.stderr);
  assert(self.stdout.includes(`${SAMPLES.length} of ${SAMPLES.length} sample logs judged as expected`), self.stdout);
});
