// Fault injection on a CUDA host: every MTC_FAULT scenario of
// tests/ts/faults.test.ts against the real driver, and device memory really
// running out. Each runs in a child process of the current runtime (that
// file, with MTC_FAULT_CHILD set), since MTC_FAULT is read once per process
// and a filled GPU is best given back by exiting. The children print one
// FAULT-RESULT line listing their problems; none must be reported.
//   node_modules/.bin/bun test tests/gpu/faults.test.ts
//   node_modules/.bin/deno test --allow-ffi --allow-env --allow-read --allow-run tests/gpu/faults.test.ts
// In CI this runs against the emulated driver (MTC_CUDA_DRIVER), whose device
// memory the out-of-memory child limits to 512 MiB.
import { cudaDeviceCount, hasKernels } from "../../ts/mod.ts";
import { assert, note } from "../ts/harness.ts";
import { gpuTest } from "./gpu_env.ts";
import { runFaultChild } from "../ts/fixtures/fault_child.ts";

const CHILD = new URL("../ts/faults.test.ts", import.meta.url).pathname;

/** Runs the child for `scenario` with `vars` added to this environment; its result. */
const child = (scenario: string, vars: Record<string, string>) => runFaultChild(CHILD, scenario, vars);

gpuTest("MTC_FAULT on this driver: each class fails get() and await with the driver call named, nothing leaks, the next copy is exact", async () => {
  const list = (await child("list", {})).scenarios ?? [];
  assert(list.length > 0, "the child listed its scenarios");
  const problems: string[] = [];
  let ran = 0;
  for (const s of list) {
    if (s.devices > cudaDeviceCount()) {
      note(`gpu: fault scenario "${s.name}": not run (needs ${s.devices} GPUs)`);
      continue;
    }
    if (s.kernels && !hasKernels()) {
      note(`gpu: fault scenario "${s.name}": not run (libmtc was built without kernels)`);
      continue;
    }
    const result = await child(s.name, { MTC_FAULT: s.fault });
    ran++;
    if (result.failures.length !== 2) problems.push(`${s.name}: ${result.failures.length} failed copies, expected 2`);
    problems.push(...result.problems.map((p) => `${s.name} (MTC_FAULT=${s.fault}): ${p}`));
  }
  assert(problems.length === 0, problems.join("\n"));
  assert(ran > 0, "at least one scenario ran");
});

gpuTest("device memory really exhausted: startCopy fails with CUDA_ERROR_OUT_OF_MEMORY, nothing leaks, and after freeing the next copy is exact", async () => {
  const result = await child("device out of memory, for real", { FAKE_CUDA_DEVICE_MEMORY_BYTES: "512m" });
  assert(result.problems.length === 0, result.problems.join("\n"));
  assert(result.failures.length === 2, "get() and await both failed");
  for (const f of result.failures) note(`gpu: out of memory, as intended (${f.how} rejected): ${f.message}`);
});
