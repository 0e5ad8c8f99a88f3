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

const CHILD = new URL("../ts/faults.test.ts", import.meta.url).pathname;
const PREFIX = "FAULT-RESULT ";

interface ChildResult {
  scenario: string;
  problems: string[];
  failures: { how: string; code: string; message: string }[];
  scenarios?: { name: string; fault: string; devices: number; kernels: boolean }[];
}

interface SpawnRuntime {
  Bun?: {
    spawnSync(options: { cmd: string[]; env: Record<string, string | undefined>; stdout: "pipe"; stderr: "pipe"; timeout?: number }): {
      exitCode: number | null;
      stdout: Uint8Array;
      stderr: Uint8Array;
    };
  };
  Deno?: {
    execPath(): string;
    Command: new (
      command: string,
      options: { args: string[]; env: Record<string, string>; stdout: "piped"; stderr: "piped"; signal?: AbortSignal },
    ) => { output(): Promise<{ code: number; stdout: Uint8Array; stderr: Uint8Array }> };
  };
  process?: { execPath: string; env: Record<string, string | undefined> };
}

const runtime = globalThis as unknown as SpawnRuntime;

/** Runs the child for `scenario` with `vars` added to this environment; its result. */
async function child(scenario: string, vars: Record<string, string>): Promise<ChildResult> {
  const all = { ...vars, MTC_FAULT_CHILD: scenario };
  const text = new TextDecoder();
  let code: number | null;
  let stdout: string;
  let stderr: string;
  if (runtime.Bun !== undefined) {
    const out = runtime.Bun.spawnSync({
      cmd: [runtime.process!.execPath, CHILD],
      env: { ...runtime.process!.env, ...all },
      stdout: "pipe",
      stderr: "pipe",
      timeout: 110_000,
    });
    [code, stdout, stderr] = [out.exitCode, text.decode(out.stdout), text.decode(out.stderr)];
  } else {
    const deno = runtime.Deno!;
    const out = await new deno.Command(deno.execPath(), {
      args: ["run", "--allow-ffi", "--allow-env", "--allow-read", CHILD],
      env: all,
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(110_000),
    }).output();
    [code, stdout, stderr] = [out.code, text.decode(out.stdout), text.decode(out.stderr)];
  }
  const line = stdout.split("\n").find((l) => l.startsWith(PREFIX));
  if (line === undefined) {
    throw new Error(`the child for "${scenario}" exited with ${code} and no result:\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`);
  }
  return JSON.parse(line.slice(PREFIX.length)) as ChildResult;
}

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
  for (const f of result.failures) note(`gpu: out of memory (${f.how}): ${f.message}`);
});
