/**
 * The JavaScript part of a copy, set beside a plain deep clone of the same
 * batch, in one process: a figure anyone can take without a GPU (on the
 * emulated driver), since it leaves out the time the copy itself takes.
 *
 * - clone: a plain recursive deep clone (every array, plain object and Map
 *   mirrored, one small object per tensor leaf), the floor of any code that
 *   builds a result per leaf;
 * - JavaScript part: `startCopy` until it returns, plus `get()` once
 *   `ready()` is true (the copy is over; only the results are settled), so
 *   the wait is left out;
 * - C calls alone: the FFI calls that part makes (plan create, add the
 *   descriptors, submit, read the results), timed on their own with the
 *   same descriptors, so that "JavaScript part less the C calls" is the
 *   JavaScript itself.
 *
 * @module
 */

import { releaseDescriptors, takeDescriptors, writeAddresses } from "../ts/copy/describe.ts";
import { encodeOptions, OPTIONS_SIZE, resolveOptions } from "../ts/copy/options.ts";
import { walk } from "../ts/copy/walk.ts";
import { library } from "../ts/ffi/library.ts";
import { DeviceTensor, disposeAll, startCopy, Tensor } from "../ts/mod.ts";

/** Medians in µs. */
export interface JsPart {
  leaves: number;
  clone: number;
  startCopyReturns: number;
  resultsOnceReady: number;
  jsPart: number;
  cCalls: number;
}

/** A plain deep clone: containers mirrored, one small object per tensor leaf, everything else as it is. */
export function plainClone(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (ArrayBuffer.isView(value) || value instanceof Tensor || value instanceof DeviceTensor) return { leaf: value };
  if (Array.isArray(value)) {
    const out = new Array(value.length);
    for (let i = 0; i < value.length; i++) out[i] = plainClone(value[i]);
    return out;
  }
  if (value instanceof Map) {
    const out = new Map();
    for (const [k, v] of value) out.set(k, plainClone(v));
    return out;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value)) out[k] = plainClone((value as Record<string, unknown>)[k]);
  return out;
}

function median(samples: number[]): number {
  const sorted = samples.slice().sort((a, b) => a - b);
  return sorted[sorted.length >> 1]! * 1000;
}

/**
 * Measures `batches` (cycled, one per copy: pass several to change the
 * structure on every call) copied to cuda:`device`: `runs` timed copies
 * after as many warm-up ones.
 */
export function measureJsPart(batches: readonly unknown[], runs: number, device = 0): JsPart {
  const target = `cuda:${device}` as const;
  const clone: number[] = [];
  const start: number[] = [];
  const results: number[] = [];
  let leaves = 0;
  for (let i = 0; i < 2 * runs; i++) {
    const batch = batches[i % batches.length];
    const t0 = performance.now();
    plainClone(batch);
    const t1 = performance.now();
    const handle = startCopy(batch, target);
    const t2 = performance.now();
    while (!handle.ready()) { /* the copy's own time is left out */ }
    const t3 = performance.now();
    const out = handle.get();
    const t4 = performance.now();
    leaves += handle.stats().leaves;
    handle.dispose();
    disposeAll(out);
    if (i >= runs) {
      clone.push(t1 - t0);
      start.push(t2 - t1);
      results.push(t4 - t3);
    }
  }
  const js = start.map((s, i) => s + results[i]!);
  return {
    leaves: leaves / (2 * runs),
    clone: median(clone),
    startCopyReturns: median(start),
    resultsOnceReady: median(results),
    jsPart: median(js),
    cCalls: cCallsAlone(batches, runs, device),
  };
}

/** The C calls of a copy alone (create, add, submit, results), with descriptors written once per batch. */
function cCallsAlone(batches: readonly unknown[], runs: number, device: number): number {
  const lib = library();
  const sym = lib.symbols;
  const bulk = sym.mtc_leaves_set_addresses !== undefined; // as startCopy reads addresses
  const options = new Uint8Array(OPTIONS_SIZE);
  encodeOptions(resolveOptions(undefined), new DataView(options.buffer));
  const prepared = batches.map((batch) => {
    const d = takeDescriptors();
    const t = walk(batch, device, d, bulk ? null : lib.backend.pointerOf);
    if (bulk) writeAddresses(lib, t);
    const words = d.words.slice(0, t.count * 10);
    releaseDescriptors(d);
    return { t, words };
  });
  const out = new Uint32Array(2);
  const samples: number[] = [];
  for (let i = 0; i < 2 * runs; i++) {
    const { t, words } = prepared[i % prepared.length]!;
    const into = new Uint32Array(t.count * 8);
    const t0 = performance.now();
    sym.mtc_plan_create(device, options, out);
    const plan = out[0]! + out[1]! * 4294967296;
    sym.mtc_plan_add_leaves(plan, words, t.count);
    sym.mtc_plan_submit(plan);
    const t1 = performance.now();
    while (sym.mtc_plan_poll(plan) === 1) { /* not timed */ }
    const t2 = performance.now();
    sym.mtc_plan_results(plan, 0, t.count, into);
    const t3 = performance.now();
    sym.mtc_plan_release(plan);
    if (i >= runs) samples.push(t1 - t0 + (t3 - t2));
  }
  for (const { t } of prepared) t.dropShares();
  return median(samples);
}

/** Prints one scenario's line: the JavaScript part, less the C calls, as multiples of the clone. */
export function printJsPart(name: string, r: JsPart): void {
  const own = r.jsPart - r.cCalls;
  console.log(
    `${name.padEnd(4)} ${r.leaves.toFixed(0).padStart(6)} leaves  clone ${r.clone.toFixed(1).padStart(7)} µs  ` +
      `startCopy ${r.startCopyReturns.toFixed(1).padStart(7)} + get() once ready ${r.resultsOnceReady.toFixed(1).padStart(6)} = ` +
      `${r.jsPart.toFixed(1).padStart(7)} µs (${(r.jsPart / r.clone).toFixed(1)}× the clone); ` +
      `less the C calls (${r.cCalls.toFixed(1)} µs): ${own.toFixed(1)} µs = ${(own / r.clone).toFixed(1)}× the clone, ` +
      `${(1000 * own / r.leaves).toFixed(0)} ns a leaf`,
  );
}
