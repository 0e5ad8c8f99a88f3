// Fault injection (MTC_FAULT) seen from TypeScript, under Bun and Deno, with
// the emulated driver. MTC_FAULT is read once per process, when libmtc loads
// the driver, so each scenario runs in a child process of the current
// runtime: this very file, started with MTC_FAULT_CHILD=<scenario>. The
// child makes two copies that hit the fault (one read with get(), one with
// await), then one that must succeed, checks what it saw against the
// scenario and prints one FAULT-RESULT line; the test asserts on it.
// tests/gpu/faults.test.ts runs the same children against the real driver.
import { DeviceTensor, type Device, disposeAll, hasKernels, MtcError, poolStats, type PoolStats, startCopy, Tensor, type TypedArray } from "../../ts/mod.ts";
import { forEachLeaf, makeExampleBatch } from "../../examples/example_batch.ts";
import { RawDriver } from "../../bench/driver.ts";
import { assert, env, test } from "./harness.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { bytesOf, randomLeaf } from "./random_tensors.ts";
import { type ChildResult, type Failure, RESULT_PREFIX, runFaultChild } from "./fixtures/fault_child.ts";

/** What one child is to copy: `data` to `device`, whose bytes must come out as `expect`'s. */
interface CopyCase {
  data: unknown;
  device: Device;
  expect: unknown;
  release(): void;
}

interface Scenario {
  /** MTC_FAULT, with the call numbers worked out from what the copies do. */
  fault: string;
  /** The failures' status name, and text every failure message holds. */
  code: string;
  texts: string[];
  /** The leaf path the failures must name (MtcError.path). */
  path?: string;
  devices: number;
  kernels?: boolean;
  prepare(): Promise<CopyCase>;
}

const MiB = 1 << 20;

/** The example batch (528 leaves, one packed chunk) and, with `big`, a 1 MiB leaf of its own. */
function hostBatch(big: boolean): CopyCase {
  const data = { samples: makeExampleBatch(11), big: big ? randomLeaf("float32", [MiB / 4], 12) : null, tag: "batch" };
  return { data, device: "cuda:0", expect: data, release() {} };
}

/** `data` put on cuda:0 through pageable copies (no pinned memory), to be copied to `device`. */
async function onDevice(data: unknown, device: Device): Promise<CopyCase> {
  const source = await startCopy(data, "cuda:0", { usePinnedStaging: false });
  return { data: source, device, expect: data, release: () => disposeAll(source) };
}

/**
 * The scenarios. Calls are counted per class from the child's first, setup
 * included: a packed host->device copy of the example batch allocates one
 * pinned staging chunk, one device block and submits one copy; the 1 MiB
 * leaf adds a device block and one staged piece; a 1 MiB device leaf to the
 * host or to another device is one copy.
 */
const SCENARIOS: Record<string, Scenario> = {
  // The chunk's allocation fails, then its retry after trimming the cache.
  "host to device, pinned-alloc": {
    fault: "pinned-alloc:1-4",
    code: "MTC_ERR_OUT_OF_MEMORY",
    texts: ["cuMemHostAlloc failed", "CUDA_ERROR_OUT_OF_MEMORY", "for the chunk that packs this leaf and 527 others"],
    path: ".samples[0].cams_gt[0].bounding_boxes", // the chunk's first leaf
    devices: 1,
    prepare: async () => hostBatch(false),
  },
  // Each failing copy gets its own leaf's block (and queues its piece), then
  // not its chunk's.
  "host to device, device-alloc": {
    fault: "device-alloc:2,device-alloc:4",
    code: "MTC_ERR_OUT_OF_MEMORY",
    texts: ["cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY", "for the chunk that packs this leaf and 527 others"],
    path: ".samples[0].cams_gt[0].bounding_boxes", // the chunk whose block could not be allocated
    devices: 1,
    prepare: async () => hostBatch(true),
  },
  // Each failing copy submits its staged piece, then fails to submit its chunk.
  "host to device, copy-submit": {
    fault: "copy-submit:2,copy-submit:4",
    code: "MTC_ERR_CUDA",
    texts: ["cuMemcpyHtoDAsync failed", "CUDA_ERROR_ILLEGAL_ADDRESS"],
    devices: 1,
    prepare: async () => hostBatch(true),
  },
  // Only event waits that saw the copy complete are counted.
  "host to device, event-query": {
    fault: "event-query:1-2",
    code: "MTC_ERR_CUDA",
    texts: ["cuEvent", "CUDA_ERROR_LAUNCH_FAILED"],
    devices: 1,
    prepare: async () => hostBatch(false),
  },
  "device to host, pinned-alloc": {
    fault: "pinned-alloc:1-4",
    code: "MTC_ERR_OUT_OF_MEMORY",
    texts: ["cuMemHostAlloc failed"],
    devices: 1,
    prepare: () => onDevice({ x: randomLeaf("float32", [MiB / 4], 21) }, "cpu"),
  },
  // Setup submits copy 1.
  "device to host, copy-submit": {
    fault: "copy-submit:2-3",
    code: "MTC_ERR_CUDA",
    texts: ["cuMemcpyDtoHAsync failed", "CUDA_ERROR_ILLEGAL_ADDRESS"],
    devices: 1,
    prepare: () => onDevice({ x: randomLeaf("float32", [MiB / 4], 22) }, "cpu"),
  },
  // The packed leaves go back in one gather kernel launch.
  "device to host, gather kernel launch": {
    fault: "copy-submit:2-3",
    code: "MTC_ERR_CUDA",
    texts: ["cuLaunchKernel", "CUDA_ERROR_ILLEGAL_ADDRESS"],
    devices: 1,
    kernels: true,
    prepare: () => onDevice(makeExampleBatch(23), "cpu"),
  },
  "device to device, copy-submit": {
    fault: "copy-submit:2-3",
    code: "MTC_ERR_CUDA",
    texts: ["cuMemcpyPeerAsync failed", "CUDA_ERROR_ILLEGAL_ADDRESS"],
    devices: 2,
    prepare: () => onDevice({ x: randomLeaf("int64", [MiB / 8], 24) }, "cuda:1"),
  },
};

/** Device memory filled up for real (the GPU suite runs it): no MTC_FAULT, a 128 MiB leaf that cannot be placed. */
const DEVICE_OOM = "device out of memory, for real";
/** MTC_FAULT=copy-submit:0: the driver load fails, saying why; host copies still work. */
const MALFORMED = "malformed MTC_FAULT";
/** Lists the scenarios (the GPU suite asks, to run them all on the real driver). */
const LIST = "list";

// ------------------------------------------------------------------ child

function failureOf(how: "get" | "await", e: unknown): Failure {
  return e instanceof MtcError ? { how, code: e.code, message: e.message, path: e.path } : { how, code: "not an MtcError", message: String(e) };
}

/** The problem when `f` does not name the leaf at `path`, else none. */
function pathProblems(f: Failure, path: string | undefined): string[] {
  return path === undefined || f.path === path ? [] : [`${f.how}: the error names the leaf ${JSON.stringify(f.path)}, expected ${JSON.stringify(path)}`];
}

const STEADY: (keyof PoolStats)[] = ["plansLive", "blocksLive", "deviceBytesLive", "hostBytesLive", "pinnedBytesInUse"];

function steadyProblems(before: PoolStats, now: PoolStats, when: string): string[] {
  return STEADY.filter((k) => now[k] !== before[k]).map((k) => `${when}: poolStats().${k} is ${now[k]}, was ${before[k]}`);
}

async function attempt(how: "get" | "await", c: CopyCase): Promise<Failure> {
  const handle = startCopy(c.data, c.device);
  try {
    const out = how === "get" ? handle.get() : await handle;
    disposeAll(out);
    return { how, code: "none", message: "the copy succeeded" };
  } catch (e) {
    return failureOf(how, e);
  } finally {
    handle.dispose();
  }
}

/** Host leaves of `data`, in order (typed arrays and Tensors). */
function hostLeaves(data: unknown): (TypedArray | Tensor)[] {
  const leaves: (TypedArray | Tensor)[] = [];
  forEachLeaf(data, (leaf) => {
    if (leaf instanceof DeviceTensor) throw new Error("expected host leaves only");
    leaves.push(leaf);
  });
  return leaves;
}

/** Copies `c` once more and compares every byte; the problem, or null. */
async function copyChecked(c: CopyCase): Promise<string | null> {
  const out = await startCopy(c.data, c.device);
  const host = c.device === "cpu" ? out : await startCopy(out, "cpu");
  try {
    const got = hostLeaves(host);
    const want = hostLeaves(c.expect);
    if (got.length !== want.length) return `${got.length} leaves came out, ${want.length} went in`;
    for (let i = 0; i < got.length; i++) {
      const a = bytesOf(got[i]!);
      const b = bytesOf(want[i]!);
      if (a.length !== b.length) return `leaf ${i}: ${a.length} bytes, expected ${b.length}`;
      for (let j = 0; j < a.length; j++) if (a[j] !== b[j]) return `leaf ${i} differs at byte ${j}`;
    }
    return null;
  } finally {
    disposeAll(host);
    if (host !== out) disposeAll(out);
  }
}

/** Two failing copies (get, then await), the pools steady, then an exact copy. */
async function runFaults(name: string, s: Scenario): Promise<ChildResult> {
  const problems: string[] = [];
  if (env("MTC_FAULT") !== s.fault) problems.push(`MTC_FAULT is ${JSON.stringify(env("MTC_FAULT"))}, the scenario counts for ${s.fault}`);
  const c = await s.prepare();
  const before = poolStats();
  const failures = [await attempt("get", c), await attempt("await", c)];
  for (const f of failures) {
    if (f.code !== s.code) problems.push(`${f.how}: ${f.code} (${f.message}), expected ${s.code}`);
    problems.push(...pathProblems(f, s.path));
    for (const text of [...s.texts, "injected by MTC_FAULT"]) {
      if (!f.message.includes(text)) problems.push(`${f.how}: the message ${JSON.stringify(f.message)} lacks ${JSON.stringify(text)}`);
    }
  }
  problems.push(...steadyProblems(before, poolStats(), "after the failed copies"));
  try {
    const mismatch = await copyChecked(c);
    if (mismatch !== null) problems.push(`the copy after the faults: ${mismatch}`);
  } catch (e) {
    problems.push(`the copy after the faults failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  problems.push(...steadyProblems(before, poolStats(), "after the last copy was disposed"));
  c.release();
  return { scenario: name, problems, failures };
}

/**
 * Fills cuda:0 with raw cuMemAlloc blocks until it is full, then copies a
 * 128 MiB leaf: both attempts must fail for lack of device memory and give
 * everything back; once the blocks are freed, the same copy succeeds.
 */
async function runDeviceOom(): Promise<ChildResult> {
  const problems: string[] = [];
  const leaf = new Uint32Array((128 * MiB) / 4);
  for (let i = 0; i < leaf.length; i++) leaf[i] = Math.imul(i, 2654435761) ^ (i >>> 7); // cheap, and no two nearby words alike
  const c: CopyCase = { data: { leaf }, device: "cuda:0", expect: { leaf }, release() {} };
  disposeAll(await startCopy(new Float32Array(1024), "cuda:0")); // the device set up before memory runs out
  const raw = new RawDriver(0);
  const filler: number[] = [];
  for (const size of [1024 * MiB, 64 * MiB]) {
    // At most 1 TiB in 1 GiB blocks: bounded even if the driver never says no.
    while (filler.length < 1024) {
      try {
        filler.push(raw.alloc(size));
      } catch (e) {
        if (!String(e).includes("error 2")) throw e; // only CUDA_ERROR_OUT_OF_MEMORY ends the fill
        break;
      }
    }
  }
  let failures: Failure[] = [];
  try {
    const before = poolStats();
    failures = [await attempt("get", c), await attempt("await", c)];
    for (const f of failures) {
      if (f.code !== "MTC_ERR_OUT_OF_MEMORY") problems.push(`${f.how}: ${f.code} (${f.message}), expected MTC_ERR_OUT_OF_MEMORY`);
      problems.push(...pathProblems(f, ".leaf"));
      for (const text of ["cuMemAlloc", "CUDA_ERROR_OUT_OF_MEMORY"]) {
        if (!f.message.includes(text)) problems.push(`${f.how}: the message ${JSON.stringify(f.message)} lacks ${JSON.stringify(text)}`);
      }
    }
    problems.push(...steadyProblems(before, poolStats(), "after the failed copies"));
  } finally {
    for (const address of filler) raw.free(address);
  }
  const before = poolStats();
  const mismatch = await copyChecked(c);
  if (mismatch !== null) problems.push(`the copy after freeing memory: ${mismatch}`);
  problems.push(...steadyProblems(before, poolStats(), "after the last copy was disposed"));
  return { scenario: DEVICE_OOM, problems: filler.length === 0 ? ["no device memory could be filled", ...problems] : problems, failures };
}

/** A malformed MTC_FAULT: every driver use fails with the reason; host copies go on. */
async function runMalformed(): Promise<ChildResult> {
  const problems: string[] = [];
  const failures: Failure[] = [];
  for (const [how, use] of [["get", () => startCopy([new Int32Array(4)], "cuda:0").get()], ["await", () => startCopy([new Int32Array(4)], "cuda:0")]] as const) {
    try {
      disposeAll(await use());
      problems.push(`${how}: a copy to cuda:0 succeeded`);
    } catch (e) {
      const f = failureOf(how, e);
      failures.push(f);
      if (f.code !== "MTC_ERR_INVALID_ARGUMENT") problems.push(`${how}: ${f.code} (${f.message}), expected MTC_ERR_INVALID_ARGUMENT`);
      for (const text of ['MTC_FAULT="copy-submit:0"', "no call number of 1 or more"]) {
        if (!f.message.includes(text)) problems.push(`${how}: the message ${JSON.stringify(f.message)} lacks ${JSON.stringify(text)}`);
      }
    }
  }
  const host = new Float64Array([1.5, -2, 3]);
  const copied = await startCopy({ host }, "cpu");
  if (copied.host !== host) problems.push("a host copy to cpu did not reuse its leaf");
  return { scenario: MALFORMED, problems, failures };
}

async function child(name: string): Promise<void> {
  let result: ChildResult;
  try {
    const s = SCENARIOS[name];
    if (name === LIST) {
      const scenarios = Object.entries(SCENARIOS).map(([n, x]) => ({ name: n, fault: x.fault, devices: x.devices, kernels: x.kernels === true }));
      result = { scenario: name, problems: [], failures: [], scenarios };
    } else if (name === DEVICE_OOM) result = await runDeviceOom();
    else if (name === MALFORMED) result = await runMalformed();
    else if (s !== undefined) result = await runFaults(name, s);
    else result = { scenario: name, problems: [`no scenario ${JSON.stringify(name)}`], failures: [] };
  } catch (e) {
    result = { scenario: name, problems: [`the child threw: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`], failures: [] };
  }
  console.log(RESULT_PREFIX + JSON.stringify(result));
}

// ----------------------------------------------------------------- parent

const proc = globalThis as unknown as { Deno?: { exit(code: number): never }; process?: { exit(code: number): never } };

/** Fails with every problem the child reported. */
function assertNoProblems(result: ChildResult): void {
  assert(result.problems.length === 0, `${result.scenario}:\n  ${result.problems.join("\n  ")}`);
}

const childScenario = env("MTC_FAULT_CHILD");
if (childScenario !== undefined) {
  await child(childScenario);
  if (proc.Deno !== undefined) proc.Deno.exit(0);
  else proc.process!.exit(0);
} else {
  const self = new URL(import.meta.url).pathname;
  const devices = skipWithoutDriver === undefined ? Number(env("FAKE_CUDA_DEVICE_COUNT") ?? 1) : 0;
  for (const [name, s] of Object.entries(SCENARIOS)) {
    let skip: string | undefined = skipWithoutDriver;
    if (skip === undefined && devices < s.devices) skip = `needs ${s.devices} devices (FAKE_CUDA_DEVICE_COUNT=${s.devices})`;
    if (skip === undefined && s.kernels === true && !hasKernels()) skip = "libmtc was built without kernels";
    test(`faults: ${name} (MTC_FAULT=${s.fault}): get() and await fail, nothing leaks, the next copy is exact`, async () => {
      const result = await runFaultChild(self, name, { MTC_FAULT: s.fault });
      assertNoProblems(result);
      assert(result.failures.length === 2, "two failed copies reported");
    }, { skip, timeout: 120_000 });
  }

  test("faults: a malformed MTC_FAULT fails every driver use with the reason, host copies go on", async () => {
    const result = await runFaultChild(self, MALFORMED, { MTC_FAULT: "copy-submit:0" });
    assertNoProblems(result);
    assert(result.failures.length === 2, "get() and await both failed");
  }, { timeout: 120_000 });
}
