/**
 * The bench's report: what a scenario measured, and the table printed from it.
 *
 * @module
 */

import { poolStats, type PoolStats } from "../ts/mod.ts";
import { runtimeName } from "./cli.ts";

/** Summary of one measured series, in microseconds. */
export interface Series {
  median: number;
  p10: number;
  p90: number;
  runs: number;
}

export interface ScenarioResult {
  id: string;
  what: string;
  leaves: number;
  bytes: number;
  library: Series;
  naive: Series;
  floor: Series;
  /** Extra series of the library (startCopy return time, await). */
  extra: Record<string, Series>;
}

export interface PoolReport {
  copies: number;
  before: PoolStats;
  after: PoolStats;
  peak: Record<string, number>;
}

export function printTable(rows: ScenarioResult[], emulated: boolean, title = "results"): void {
  const stats = poolStats();
  const where = emulated ? " (emulated driver: host memcpy, not a GPU)" : "";
  console.log(`\n${title}${where}: ${runtimeName()}, ${rows.length ? "" : "no scenarios; "}pools: pinned cached ${stats.pinnedBytesCached} B, device live ${stats.deviceBytesLive} B`);
  console.log("scenario  leaves  bytes        library median (p10–p90)   naive per-leaf   floor      library/naive  library/floor");
  for (const r of rows) {
    console.log(
      `${r.id.padEnd(8)}  ${String(r.leaves).padStart(6)}  ${String(r.bytes).padStart(11)}  ` +
        `${series(r.library).padEnd(27)} ${us(r.naive.median).padStart(12)}  ${us(r.floor.median).padStart(9)}  ` +
        `${(r.library.median / r.naive.median).toFixed(3).padStart(12)}  ${(r.library.median / r.floor.median).toFixed(2).padStart(12)}`,
    );
    if (r.id === "S2" || r.id === "S7" || r.id === "D2") console.log(`          effective ${(r.bytes / (r.library.median * 1e3)).toFixed(1)} GB/s (floor ${(r.bytes / (r.floor.median * 1e3)).toFixed(1)} GB/s, naive ${(r.bytes / (r.naive.median * 1e3)).toFixed(1)} GB/s)`);
    for (const [name, s] of Object.entries(r.extra)) {
      const shown = name.startsWith("batches per second") ? `${s.median.toFixed(0)}/s` : name.endsWith("(ratio of pairs)") ? `${s.median.toFixed(2)}× (${s.p10.toFixed(2)}–${s.p90.toFixed(2)})` : series(s);
      const gbps = r.id === "D2" ? ` (${(r.bytes / (s.median * 1e3)).toFixed(1)} GB/s)` : "";
      console.log(`          ${name}: ${shown}${gbps}`);
    }
    console.log(`          ${r.what}`);
  }
}

/** S6 beside S1: startCopy → get() per leaf. */
export function printPerLeaf(rows: ScenarioResult[]): void {
  const s1 = rows.find((r) => r.id === "S1");
  const s6 = rows.find((r) => r.id === "S6");
  if (s1 === undefined || s6 === undefined) return;
  const perLeaf = (r: ScenarioResult) => (1000 * r.library.median) / r.leaves;
  console.log(
    `per leaf, startCopy → get(): S1 ${perLeaf(s1).toFixed(0)} ns, S6 ${perLeaf(s6).toFixed(0)} ns ` +
      `(S6 over S1: ${(perLeaf(s6) / perLeaf(s1)).toFixed(2)}×)`,
  );
}

/** A per-batch series as batches per second (the "median" field holds the rate). */
export function rate(perBatch: Series): Series {
  const r = (us: number) => 1e6 / us;
  return { median: r(perBatch.median), p10: r(perBatch.p90), p90: r(perBatch.p10), runs: perBatch.runs };
}

export function series(s: Series): string {
  return `${us(s.median)} (${s.p10.toFixed(1)}–${s.p90.toFixed(1)})`;
}

export function us(v: number): string {
  return `${v.toFixed(1)} µs`;
}

export function printPools(p: PoolReport): void {
  console.log(`\nP1: pools around ${p.copies} S1 copies with outputs disposed (bytes)`);
  console.log("pool                 after warm-up       after      peak");
  for (const key of Object.keys(p.peak)) {
    const b = (p.before as unknown as Record<string, number>)[key]!;
    const a = (p.after as unknown as Record<string, number>)[key]!;
    console.log(`${key.padEnd(20)} ${String(b).padStart(13)} ${String(a).padStart(10)} ${String(p.peak[key]).padStart(9)}`);
  }
  console.log(`pinned allocations ${p.after.pinnedAllocations - p.before.pinnedAllocations} and pool reuses ${p.after.pinnedReuses - p.before.pinnedReuses} during the run`);
}

