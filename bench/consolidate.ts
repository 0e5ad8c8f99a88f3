/**
 * S1c: `Arena#consolidate` of the example batch (528 leaves, 153,628 bytes
 * of pageable arrays) into an arena, reset before each fill. No GPU work:
 * the figure is the same on the emulated driver.
 *
 * - library: `arena.tryReset()` + `arena.consolidate(batch)`;
 * - naive: a deep clone with a fresh pageable copy of each leaf
 *   (`slice()`), what a loader does without an arena;
 * - floor: one `Uint8Array#set` of the batch's bytes, the memcpy a fill
 *   cannot go below.
 *
 * @module
 */

import { Arena, DeviceTensor, Tensor } from "../ts/mod.ts";
import { EXAMPLE_BATCH_BYTES, EXAMPLE_BATCH_TENSORS, makeExampleBatch } from "../examples/example_batch.ts";
import type { ScenarioResult, Series } from "./report.ts";

/** Medians (and p10, p90) in µs of `runs` timed calls of `step`, after as many warm-up ones (at least 200). */
function timed(runs: number, step: () => void): Series {
  const samples: number[] = [];
  const warmUp = Math.max(200, runs);
  for (let i = 0; i < warmUp + runs; i++) {
    const t0 = performance.now();
    step();
    const t1 = performance.now();
    if (i >= warmUp) samples.push((t1 - t0) * 1000);
  }
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  return { median: at(0.5), p10: at(0.1), p90: at(0.9), runs };
}

/** A deep clone with each leaf copied into a fresh array of its own: the naive fill. */
function cloneWithCopies(value: unknown): unknown {
  if (typeof value !== "object" || value === null || value instanceof DeviceTensor) return value;
  if (value instanceof Tensor) return new Tensor((value.data as Uint8Array).slice(), value.shape, value.dtype);
  if (ArrayBuffer.isView(value)) return (value as Uint8Array).slice();
  if (Array.isArray(value)) return value.map(cloneWithCopies);
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [k, cloneWithCopies(v)]));
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value)) out[k] = cloneWithCopies((value as Record<string, unknown>)[k]);
  return out;
}

/**
 * S1c: `runs` timed consolidates of the example batch into a fresh arena
 * (warm-up first), beside the naive fill and the memcpy floor.
 */
export function consolidateScenario(runs: number): ScenarioResult {
  const batch = makeExampleBatch(1);
  using arena = Arena.create(1 << 20);
  const library = timed(runs, () => {
    if (!arena.tryReset()) throw new Error("S1c: the arena is busy between fills");
    arena.consolidate(batch);
  });
  const naive = timed(runs, () => void cloneWithCopies(batch));
  const source = new Uint8Array(EXAMPLE_BATCH_BYTES).fill(7);
  const target = new Uint8Array(EXAMPLE_BATCH_BYTES);
  const floor = timed(runs, () => target.set(source));
  return {
    id: "S1c",
    what: "example batch consolidated into an arena (Arena#consolidate, no copy); naive: a deep clone with a slice() per leaf; floor: one memcpy",
    leaves: EXAMPLE_BATCH_TENSORS,
    bytes: EXAMPLE_BATCH_BYTES,
    library,
    naive,
    floor,
    extra: {},
  };
}
