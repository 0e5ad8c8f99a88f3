/**
 * Where the time of S1 (the example batch host → cuda:0) and of S4 (the same
 * batch back from cuda:0 to the host) goes on the JavaScript side: the walk,
 * the address reads, startCopy as a whole, the wait, building the results,
 * disposal. Medians in µs over many copies, in
 * one process. bench/c/plan_bench.c gives the C library's own phases.
 *
 *   bun bench/breakdown.ts
 *   deno run --allow-ffi --allow-env --allow-read bench/breakdown.ts
 *
 * @module
 */

import { makeExampleBatch } from "../examples/example_batch.ts";
import { traverse } from "../ts/copy/walk.ts";
import { currentBackend } from "../ts/ffi/library.ts";
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
  console.log(`${name.padEnd(44)} ${median(samples).padStart(8)} µs`);
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
row("address reads, one per leaf (pointerOf)", timeEach(() => views.forEach((v) => backend.pointerOf(v))));

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

const awaited: number[] = [];
for (let i = 0; i < runs; i++) {
  const t0 = performance.now();
  const handle = startCopy(batch, "cuda:0");
  const out = await handle;
  awaited.push(performance.now() - t0);
  handle.dispose();
  disposeAll(out);
}
row("startCopy → await", awaited);

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
