/**
 * Where the time of S1 (the example batch host → cuda:0) and of S4 (the same
 * batch back from cuda:0 to the host) goes on the JavaScript side: the walk,
 * the address reads, startCopy as a whole, the wait, building the results,
 * disposal, and what one FFI call costs (with and without a 64-bit
 * argument). Medians in µs over many copies, in one process.
 * bench/c/plan_bench.c gives the C library's own phases.
 *
 *   bun bench/breakdown.ts
 *   deno run --allow-ffi --allow-env --allow-read bench/breakdown.ts
 *
 * @module
 */

import { makeExampleBatch } from "../examples/example_batch.ts";
import { writeAddresses } from "../ts/copy/describe.ts";
import { encodeOptions, OPTIONS_SIZE, resolveOptions } from "../ts/copy/options.ts";
import { traverse } from "../ts/copy/walk.ts";
import { currentBackend, library } from "../ts/ffi/library.ts";
import { type AsyncCopyHandle, disposeAll, poolStats, startCopy } from "../ts/mod.ts";
import type { TypedArray } from "../ts/tensor/dtype.ts";
import { CommandLine } from "./cli.ts";

new CommandLine("usage: bun bench/breakdown.ts (no options): S1 and S4 split into their phases, medians in µs", {});

const batch = makeExampleBatch(1);
const runs = 2000;
const warmUp = runs / 5;

function median(samples: number[]): string {
  const sorted = samples.slice(warmUp).sort((a, b) => a - b);
  return (sorted[sorted.length >> 1]! * 1000).toFixed(1);
}

function row(name: string, samples: number[]): void {
  console.log(`${name.padEnd(52)} ${median(samples).padStart(8)} µs`);
}

function timeEach(fn: () => void): number[] {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    samples.push(performance.now() - t0);
  }
  return samples;
}

const walk = traverse(batch, 0);
const views = walk.views.filter((v): v is TypedArray => v !== undefined);
const backend = currentBackend();
console.log(`S1 breakdown: ${walk.count} leaves; medians of ${runs - warmUp} after ${warmUp} warm-up`);
row("walk + describe (no address reads)", timeEach(() => traverse(batch, 0)));
row("address reads, one per leaf (pointerOf)", timeEach(() => {
  for (const v of views) backend.pointerOf(v); // (a forEach callback here took 4× as long under Deno)
}));
const lib = library();
if (lib.symbols.mtc_leaves_set_addresses !== undefined) {
  // What startCopy does: eight leaves a call, in submit.
  row("address reads as startCopy does them (8 a call)", timeEach(() => writeAddresses(lib, walk)));
}
// One call's cost, as the library makes it (a handle is a 64-bit argument).
const calls = 1000;
const sym = lib.symbols;
row("1,000 FFI calls, 32-bit only (mtc_version_number)", timeEach(() => {
  for (let i = 0; i < calls; i++) sym.mtc_version_number();
}));
{
  const options = new Uint8Array(OPTIONS_SIZE);
  encodeOptions(resolveOptions(undefined), new DataView(options.buffer));
  const out = new Uint32Array(2);
  if (sym.mtc_plan_create(0, options, out) !== 0) throw new Error("mtc_plan_create failed");
  const plan = out[0]! + out[1]! * 4294967296;
  row("1,000 FFI calls, a handle (mtc_plan_leaf_count)", timeEach(() => {
    for (let i = 0; i < calls; i++) sym.mtc_plan_leaf_count(plan);
  }));
  sym.mtc_plan_release(plan);
}

/** startCopy(data, device) → get() → dispose, `runs` times: each phase's samples. */
function copyPhases(data: unknown, device: "cuda:0" | "cpu"): Record<"start" | "wait" | "dispose" | "total", number[]> {
  const phases = { start: [] as number[], wait: [] as number[], dispose: [] as number[], total: [] as number[] };
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const handle = startCopy(data, device);
    const t1 = performance.now();
    const out = handle.get();
    const t2 = performance.now();
    handle.dispose();
    disposeAll(out);
    const t3 = performance.now();
    phases.start.push(t1 - t0);
    phases.wait.push(t2 - t1);
    phases.dispose.push(t3 - t2);
    phases.total.push(t2 - t0);
  }
  return phases;
}

/** get() of a copy already over: the results alone, `runs` times. */
function resultsOnly(data: unknown, device: "cuda:0" | "cpu"): number[] {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const handle: AsyncCopyHandle<unknown> = startCopy(data, device);
    while (!handle.ready()) { /* spin: the copy is over before get() */ }
    const t0 = performance.now();
    const out = handle.get();
    samples.push(performance.now() - t0);
    handle.dispose();
    disposeAll(out);
  }
  return samples;
}

const phases = copyPhases(batch, "cuda:0");
row("startCopy returns", phases.start);
row("get() (wait + results)", phases.wait);
row("startCopy → get()", phases.total);
row("dispose() + disposeAll(outputs)", phases.dispose);
row("get() once ready (results only)", resultsOnly(batch, "cuda:0"));

// S1 as one copy of an app: startCopy, await, then dispose the handle and the outputs.
const cycle = { start: [] as number[], wait: [] as number[], dispose: [] as number[], total: [] as number[] };
for (let i = 0; i < runs; i++) {
  const t0 = performance.now();
  const handle = startCopy(batch, "cuda:0");
  const t1 = performance.now();
  const out = await handle;
  const t2 = performance.now();
  handle.dispose();
  disposeAll(out);
  const t3 = performance.now();
  cycle.start.push(t1 - t0);
  cycle.wait.push(t2 - t1);
  cycle.dispose.push(t3 - t2);
  cycle.total.push(t3 - t0);
}
row("startCopy → await", cycle.start.map((s, i) => s + cycle.wait[i]!));
row("  of which startCopy returns", cycle.start);
row("  then dispose() + disposeAll(outputs)", cycle.dispose);
row("startCopy → await → dispose (S1 in all)", cycle.total);

// S4: the batch on cuda:0 back to the host.
const onGpu = startCopy(batch, "cuda:0").get();
console.log(`S4 breakdown: the same batch cuda:0 → cpu`);
row("walk (traverse of the DeviceTensors)", timeEach(() => traverse(onGpu, -1)));
const back = copyPhases(onGpu, "cpu");
row("startCopy returns", back.start);
row("get() (wait + results)", back.wait);
row("startCopy → get()", back.total);
row("get() once ready (results only)", resultsOnly(onGpu, "cpu"));
row("dispose() + disposeAll(outputs)", back.dispose);
// The first S4 walk above may include the JIT recompiling traverse for
// device leaves after it was compiled for host ones; these are the walks
// once both kinds have been seen.
row("S1 walk again, after both directions", timeEach(() => traverse(batch, 0)));
row("S4 walk again, after both directions", timeEach(() => traverse(onGpu, -1)));
disposeAll(onGpu);

const stats = poolStats();
console.log(`pools: pinned cached ${stats.pinnedBytesCached} B, in use ${stats.pinnedBytesInUse} B, device live ${stats.deviceBytesLive} B`);
