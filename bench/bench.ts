/**
 * Benchmarks: each scenario timed with the library, with a naive per-leaf copy
 * over the same driver, and against the floor (one pinned copy of the same
 * bytes), in one process. Prints a table and writes JSON.
 *
 *   bun bench/bench.ts [--runs N] [--only S1,S3] [--json results.json] [--pools]
 *   deno run --allow-ffi --allow-env --allow-read --allow-write bench/bench.ts [...]
 *
 * Against the emulated driver (MTC_CUDA_DRIVER=libfakecuda.so) it runs, and
 * says that its figures time host memcpy, not a GPU.
 *
 * S1  the example batch (528 tensors, 153,628 bytes) host → cuda:0, startCopy → get();
 *     also how long startCopy takes to return, and startCopy → await
 * S2  8 leaves of 16 MiB float32 in pageable memory → cuda:0 (effective GB/s)
 * S3  10,000 leaves of 4 to 256 bytes → cuda:0
 * S4  the example batch already on cuda:0 → cpu
 * S5  1,000 example batches through prefetch (depth 2) → cuda:0: batches per second
 * S5w, S5wg, S5wa  example batches made on N worker threads (startLoader, depth 2; N from
 *     --workers) → cuda:0, taken in order: batches per second beside S5, and S5f (S5 with
 *     batches built fresh); S5wa writes them into arenas; the main thread's take + dispose
 *     per batch timed apart (bench/workers.ts)
 * S6  batches that vary: a structure of its own on every call (bench/varying_batch.ts,
 *     about 2,100 leaves), host → cuda:0; its cost per leaf is printed beside S1's
 * S7  mixed, pageable → cuda:0: 4 point clouds of 1.5–2 MB, their 4 label arrays of
 *     100–130 KB and 40 small arrays each of 40–400 bytes (168 leaves; effective GB/s)
 * S8  a decode step: 5 int32 arrays of 64 B–16 KiB (22,592 bytes) copyInto static cuda:0 buffers
 *     every step, against 5 synchronous copies into the same buffers; and copyInto of the
 *     example batch into existing DeviceTensors beside startCopy of it (bench/decode_step.ts)
 * D1  the example batch already on cuda:0 → cuda:1 by startCopy, and copyInto DeviceTensors made
 *     once on cuda:1, beside the same batch host → cuda:1; floor: one peer copy (bench/two_gpus.ts)
 * D2  8 × 16 MiB float32 cuda:0 → cuda:1 by startCopy and by copyInto (effective GB/s)
 *     (D1 and D2 run only where there are two GPUs)
 * J1  the JavaScript part of a copy (startCopy returns + get() once ready) of the S1 and
 *     S6 batches as a multiple of a plain deep clone of the same batch (bench/js_part.ts):
 *     the figure to watch on the emulated driver, where the copy's own time means nothing
 * S1p, S1a, S2p, S7p  S1, S2 and S7 from pinned memory (arenas, pinned tensors), read in
 *     place with no staging; S1a the arena as one copy; S4p copyInto from cuda:0 into arena
 *     destinations beside pageable ones (bench/pinned.ts)
 * S1r, S1pr, I1r, I1ar  prepared copies (prepareCopy, prepareCopyInto) of the example
 *     batch, pageable and in an arena, beside the plain call (bench/prepared.ts)
 * S1c  Arena.consolidate of the example batch, the fill of an arena batch (bench/consolidate.ts)
 * P1  pools after 10,000 S1 copies with outputs disposed: steady state and peaks
 *     (only with --pools, or --only P1: it takes a few seconds)
 *
 * @module
 */

import { makeMixedBatch, mixedLeaves } from "./mixed_batch.ts";
import { currentBackend } from "../ts/ffi/library.ts";
import { cudaDeviceCount, cudaUnavailableReason, type DeviceTensor, disposeAll, poolStats, prefetch, startCopy } from "../ts/mod.ts";
import { CommandLine, exit, runtimeName } from "./cli.ts";
import { forEachLeaf, makeExampleBatch, seededRandom } from "../examples/example_batch.ts";
import { RawDriver } from "./driver.ts";
import { type PoolReport, printPerLeaf, printPools, printTable, rate, type ScenarioResult, type Series } from "./report.ts";
import { measureJsPart, printJsPart } from "./js_part.ts";
import { makeVaryingBatch } from "./varying_batch.ts";
import { decodeStep } from "./decode_step.ts";
import { pinnedScenarios, printPinnedCounters } from "./pinned.ts";
import { PREPARED_SCENARIOS, preparedScenarios } from "./prepared.ts";
import { consolidateScenario } from "./consolidate.ts";
import { twoGpus } from "./two_gpus.ts";
import { workerScenarios } from "./workers.ts";

type HostView = ArrayBufferView & { length: number };

const SCENARIOS = ["S1", "S2", "S3", "S4", "S5", "S5w", "S5wg", "S5wa", "S6", "S7", "S8", "S1p", "S1a", "S2p", "S7p", "S4p", ...PREPARED_SCENARIOS, "S1c", "D1", "D2", "J1", "P1"];
const cli = new CommandLine(
  `usage: bun bench/bench.ts [--runs N] [--only S1,S3] [--workers 1,2,4,8] [--json results.json] [--pools]

  --runs N        timed runs of S1 and S4 (default 200; fewer for S2, S3, S7; S5w batches 5 × N, at most 1,000)
  --only LIST     the scenarios to run, of ${SCENARIOS.join(", ")} (default: all but P1)
  --workers LIST  worker counts of S5w, S5wg and S5wa (default 1,2,4,8)
  --json FILE     also write the results as JSON
  --pools         also run P1, the pools' steady state`,
  { runs: "string", only: "string", workers: "string", json: "string", pools: "boolean" },
);
const runs = cli.count("runs", 200, 1);
const only = cli.string("only")?.split(",");
const unknown = only?.filter((id) => !SCENARIOS.includes(id)) ?? [];
if (unknown.length > 0) cli.fail(`--only: no scenario ${unknown.join(", ")}`);
const workerCounts = (cli.string("workers") ?? "1,2,4,8").split(",").map(Number);
if (workerCounts.some((n) => !Number.isInteger(n) || n < 1 || n > 64)) cli.fail(`--workers wants worker counts from 1 to 64, not "${cli.string("workers")}"`);
const jsonPath = cli.string("json");
const device = 0;

const noCuda = cudaUnavailableReason();
if (noCuda !== undefined) {
  console.log(`bench: no CUDA device: ${noCuda} (the benchmarks need one; set MTC_CUDA_DRIVER to try the emulated driver)`);
  exit(1);
}
const driver = new RawDriver(device);
if (driver.emulated) {
  console.log("bench: the emulated CUDA driver (tests/fake_cuda): every figure below times host memcpy and a");
  console.log("bench: modelled delay, not a GPU; it shows that the benchmarks run, not how fast the library is");
}
const pointerOf = (view: ArrayBufferView) => currentBackend().pointerOf(view);
const results: ScenarioResult[] = [];

if (wanted("S1")) results.push(await hostToDevice("S1", "example batch host → cuda:0", exampleLeaves(), makeExampleBatch(1), runs, true));
if (wanted("S2")) {
  const big = Array.from({ length: 8 }, (_, i) => randomFloats(4 << 20, 100 + i));
  results.push(await hostToDevice("S2", "8 × 16 MiB float32, pageable → cuda:0", big, big, Math.max(10, Math.floor(runs / 10)), false));
}
if (wanted("S3")) {
  const random = seededRandom(3);
  const tiny = Array.from({ length: 10_000 }, (_, i) => randomFloats(1 + Math.floor(random() * 64), i));
  results.push(await hostToDevice("S3", "10,000 leaves of 4–256 bytes → cuda:0", tiny, tiny, Math.max(20, Math.floor(runs / 4)), false));
}
const varying = wanted("S6") || wanted("J1") ? Array.from({ length: 64 }, (_, i) => makeVaryingBatch(600 + i)) : [];
if (wanted("S6")) {
  let next = 0;
  const pick = () => varying[next++ % varying.length];
  const s6 = await hostToDevice("S6", "batches that vary, a new structure each call (leaves: the mean) → cuda:0", hostLeaves(varying[0]), varying[0], runs, false, pick);
  s6.leaves = Math.round(varying.reduce((sum: number, b) => sum + hostLeaves(b).length, 0) / varying.length);
  results.push(s6);
}
if (wanted("S7")) {
  const mixed = makeMixedBatch((bytes, seed) => randomFloats(bytes >> 2, seed));
  const leaves = mixedLeaves(mixed);
  results.push(await hostToDevice("S7", "mixed: 4 × ~2 MB, 4 × ~120 KB, 160 small, pageable → cuda:0", leaves, mixed, Math.max(20, Math.floor(runs / 4)), false));
}
results.push(...await pinnedScenarios({ wanted, runs, hostToDevice, measure, summarize, floorCopy, leavesOf: hostLeaves }));
results.push(...preparedScenarios({ wanted, runs, measure, summarize, floorCopy, leavesOf: hostLeaves }));
if (wanted("S1c")) results.push(consolidateScenario(runs));
if (wanted("S4")) results.push(deviceToHost("S4", "example batch cuda:0 → cpu", runs));
if (wanted("S5") || wanted("S5w") || wanted("S5wg") || wanted("S5wa")) {
  const s5 = await prefetchThroughput("S5", "1,000 example batches through prefetch (depth 2) → cuda:0", 1000);
  results.push(s5);
  if (wanted("S5w") || wanted("S5wg") || wanted("S5wa")) results.push(...await workerScenarios({ wanted, count: Math.min(1000, 5 * runs), workerCounts, s5, summarize }));
}
if (wanted("S8")) results.push(await decodeStep("S8", runs, { driver, pointerOf, measure, summarize, floorCopy }));
const twoGpuIds = ["D1", "D2"].filter(wanted);
if (twoGpuIds.length > 0 && cudaDeviceCount() < 2) console.log(`bench: ${twoGpuIds.join(", ")}: not run (needs two GPUs; this host has ${cudaDeviceCount()})`);
else if (twoGpuIds.length > 0) results.push(...await twoGpus(twoGpuIds, runs, { driver, measure, summarize }, randomFloats));
const pools = only?.includes("P1") || cli.flag("pools") ? poolSteadyState(10_000) : undefined;

printTable(results, driver.emulated);
printPerLeaf(results);
printPinnedCounters();
if (wanted("J1")) {
  console.log("\nJ1: the JavaScript part of a copy against a plain deep clone of the same batch, medians, in one process");
  // At least 1,000 copies after as many warm-up ones: with fewer, JavaScriptCore may not have compiled the walk at its top tier.
  const jsRuns = Math.max(runs, 1000);
  printJsPart("S1", measureJsPart([makeExampleBatch(1)], jsRuns));
  printJsPart("S6", measureJsPart(varying, jsRuns));
}
if (pools !== undefined) printPools(pools);
if (jsonPath !== undefined) writeJson(jsonPath, results, pools);

// ------------------------------------------------------------ scenarios

/** Host → device: the library, the naive per-leaf copy and the floor. */
async function hostToDevice(
  id: string,
  what: string,
  leaves: HostView[],
  batch: unknown,
  n: number,
  withExtras: boolean,
  nextBatch: () => unknown = () => batch,
): Promise<ScenarioResult> {
  const bytes = leaves.reduce((sum, v) => sum + v.byteLength, 0);
  const extra: Record<string, Series> = {};
  const returned: number[] = [];
  const library = measure(n, () => {
    const input = nextBatch();
    const t0 = performance.now();
    const handle = startCopy(input, "cuda:0");
    returned.push(performance.now() - t0);
    const out = handle.get();
    return () => {
      handle.dispose();
      disposeAll(out);
    };
  });
  if (withExtras) {
    extra["startCopy returns"] = summarize(returned.slice(-n));
    const paired = await measureGetAndAwait(n, batch);
    extra["startCopy → await"] = summarize(paired.await);
    extra["startCopy → get, paired with await"] = summarize(paired.get);
    extra["await over get (paired runs)"] = summarize(paired.await.map((a, i) => a - paired.get[i]!));
  }
  const naive = measure(n, () => {
    const owned = leaves.map((v) => {
      const d = driver.alloc(v.byteLength);
      driver.copyToDevice(d, pointerOf(v), v.byteLength);
      return d;
    });
    return () => owned.forEach((d) => driver.free(d));
  });
  const floor = floorCopy(bytes, n, "toDevice");
  return { id, what, leaves: leaves.length, bytes, library: summarize(library), naive: summarize(naive), floor, extra };
}

/** Device → host of the example batch already on the GPU. */
function deviceToHost(id: string, what: string, n: number): ScenarioResult {
  const onGpu = startCopy(makeExampleBatch(4), "cuda:0").get();
  const sources: DeviceTensor[] = [];
  forEachLeaf(onGpu, (leaf) => sources.push(leaf as DeviceTensor));
  const bytes = sources.reduce((sum, t) => sum + t.byteLength, 0);
  const library = measure(n, () => {
    const handle = startCopy(onGpu, "cpu");
    const out = handle.get();
    return () => {
      handle.dispose();
      disposeAll(out);
    };
  });
  const naive = measure(n, () => {
    for (const t of sources) {
      const into = new Uint8Array(t.byteLength);
      driver.copyToHost(pointerOf(into), t.address, t.byteLength);
    }
    return () => {};
  });
  const floor = floorCopy(bytes, n, "toHost");
  disposeAll(onGpu);
  return { id, what, leaves: sources.length, bytes, library: summarize(library), naive: summarize(naive), floor, extra: {} };
}

/**
 * Batches per second through prefetch (depth 2), the consumer disposing each
 * batch; the naive per-leaf copy and the floor as batches per second too
 * (reported as µs per batch in the table, with the rate below it).
 */
async function prefetchThroughput(id: string, what: string, count: number): Promise<ScenarioResult> {
  const pool = Array.from({ length: 16 }, (_, i) => makeExampleBatch(100 + i)); // a loader's fresh batches, cycled
  const leaves = exampleLeaves();
  const bytes = leaves.reduce((sum, v) => sum + v.byteLength, 0);
  function* loader(n: number) {
    for (let i = 0; i < n; i++) yield pool[i % pool.length]!;
  }
  const rounds: number[] = [];
  for (let round = 0; round < 4; round++) { // round 0 is warm-up
    const t0 = performance.now();
    for await (const batch of prefetch(loader(count), "cuda:0", { depth: 2 })) disposeAll(batch);
    if (round > 0) rounds.push((performance.now() - t0) / count);
  }
  const naiveBatches = Math.max(5, Math.floor(count / 20));
  const naive: number[] = [];
  measure(naiveBatches, () => {
    const owned = leaves.map((v) => {
      const d = driver.alloc(v.byteLength);
      driver.copyToDevice(d, pointerOf(v), v.byteLength);
      return d;
    });
    return () => owned.forEach((d) => driver.free(d));
  }).forEach((ms) => naive.push(ms));
  const floor = floorCopy(bytes, count, "toDevice");
  const library = summarize(rounds);
  return {
    id,
    what,
    leaves: leaves.length,
    bytes,
    library,
    naive: summarize(naive),
    floor,
    extra: { "batches per second (library)": rate(library), "batches per second (naive)": rate(summarize(naive)), "batches per second (floor)": rate(floor) },
  };
}

/** `copies` S1 copies, outputs disposed: the pools before, after (steady state) and at their peaks. */
function poolSteadyState(copies: number): PoolReport {
  const batch = makeExampleBatch(1);
  for (let i = 0; i < 100; i++) disposeAll(startCopy(batch, "cuda:0").get()); // warm-up: the steady state
  const before = poolStats();
  const peak: Record<string, number> = { pinnedBytesCached: 0, pinnedBytesInUse: 0, deviceBytesLive: 0, blocksLive: 0, plansLive: 0 };
  for (let i = 0; i < copies; i++) {
    const handle = startCopy(batch, "cuda:0");
    const mid = poolStats();
    const out = handle.get();
    handle.dispose();
    disposeAll(out);
    for (const key of Object.keys(peak)) peak[key] = Math.max(peak[key]!, (mid as unknown as Record<string, number>)[key]!);
  }
  return { copies, before, after: poolStats(), peak };
}

/** One copy of `bytes` between pinned host memory and the device, then a sync. */
function floorCopy(bytes: number, n: number, direction: "toDevice" | "toHost"): Series {
  const pinned = driver.allocPinned(bytes);
  const dev = driver.alloc(bytes);
  const samples = measure(n, () => {
    if (direction === "toDevice") driver.copyToDevice(dev, pinned, bytes);
    else driver.copyToHost(pinned, dev, bytes);
    return () => {};
  });
  driver.free(dev);
  driver.freePinned(pinned);
  return summarize(samples);
}

/**
 * startCopy → get() and startCopy → await of `batch`, one copy at a time,
 * alternating, so that both see the same machine: on a noisy host the
 * difference of pairs is steadier than a difference of two runs' medians.
 */
async function measureGetAndAwait(n: number, batch: unknown): Promise<{ get: number[]; await: number[] }> {
  const got: number[] = [];
  const awaited: number[] = [];
  for (let i = 0; i < warmUpOf(n) + n; i++) {
    const t0 = performance.now();
    const h1 = startCopy(batch, "cuda:0");
    const out1 = h1.get();
    const t1 = performance.now();
    h1.dispose();
    disposeAll(out1);
    const t2 = performance.now();
    const h2 = startCopy(batch, "cuda:0");
    const out2 = await h2;
    const t3 = performance.now();
    h2.dispose();
    disposeAll(out2);
    if (i >= warmUpOf(n)) {
      got.push(t1 - t0);
      awaited.push(t3 - t2);
    }
  }
  return { get: got, await: awaited };
}

// ------------------------------------------------------------ measuring

/** Warm-up runs before n timed ones: enough for the JIT's top tier (JavaScriptCore needs a few hundred calls). */
function warmUpOf(n: number): number {
  return Math.min(300, Math.max(3, Math.floor(n / 2)));
}

/** Runs `step` warm-up + n times; each returns its clean-up, which is not timed. */
function measure(n: number, step: () => () => void): number[] {
  const samples: number[] = [];
  for (let i = 0; i < warmUpOf(n) + n; i++) {
    const t0 = performance.now();
    const cleanUp = step();
    const t1 = performance.now();
    cleanUp();
    if (i >= warmUpOf(n)) samples.push(t1 - t0);
  }
  return samples;
}

function summarize(ms: number[]): Series {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 1000;
  return { median: at(0.5), p10: at(0.1), p90: at(0.9), runs: ms.length };
}

// ------------------------------------------------------------ inputs

function exampleLeaves(): HostView[] {
  return hostLeaves(makeExampleBatch(1));
}

function hostLeaves(batch: unknown): HostView[] {
  const leaves: HostView[] = [];
  forEachLeaf(batch, (leaf) => leaves.push(("data" in leaf ? leaf.data : leaf) as HostView));
  return leaves;
}

function randomFloats(length: number, seed: number): Float32Array {
  const random = seededRandom(seed);
  const a = new Float32Array(length);
  for (let i = 0; i < length; i++) a[i] = random();
  return a;
}

// ------------------------------------------------------------ reporting

function writeJson(path: string, rows: ScenarioResult[], pools?: PoolReport): void {
  const text = JSON.stringify({ runtime: runtimeName(), emulatedDriver: driver.emulated, date: new Date().toISOString(), runs, scenarios: rows, pools }, null, 2);
  const g = globalThis as unknown as {
    Deno?: { writeTextFileSync(p: string, t: string): void };
    Bun?: { write(p: string, t: string): unknown };
  };
  if (g.Deno) g.Deno.writeTextFileSync(path, text);
  else void g.Bun!.write(path, text);
  console.log(`wrote ${path}`);
}

// ------------------------------------------------------------ command line

function wanted(id: string): boolean {
  return only === undefined || only.includes(id);
}

