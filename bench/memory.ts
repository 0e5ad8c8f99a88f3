/**
 * What the soak runs share: the process's memory as the runtime reports it,
 * one sample of it with the library's pools, a forced collection where the
 * runtime allows one, and MiB for printing.
 *
 * @module
 */

import { poolStats } from "../ts/mod.ts";

/** Resident set and JS heap, in bytes. */
export interface Memory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
}

/** The runtime's memoryUsage(): Deno's, or Bun's process.memoryUsage(). */
export function memory(): Memory {
  const g = globalThis as unknown as {
    Deno?: { memoryUsage(): Memory };
    process?: { memoryUsage(): Memory };
  };
  return g.Deno !== undefined ? g.Deno.memoryUsage() : g.process!.memoryUsage();
}

/** Forces a collection where the runtime allows it (Bun; Deno with --expose-gc). */
export function collect(): void {
  const g = globalThis as unknown as { Bun?: { gc(full: boolean): void }; gc?: () => void };
  if (g.Bun !== undefined) g.Bun.gc(true);
  else if (typeof g.gc === "function") g.gc();
}

/** Whether {@link collect} can force a collection in this process. */
export function canCollect(): boolean {
  const g = globalThis as unknown as { Bun?: unknown; gc?: unknown };
  return g.Bun !== undefined || typeof g.gc === "function";
}

/** `n` bytes in MiB, one decimal. */
export function mib(n: number): string {
  return (n / 2 ** 20).toFixed(1);
}

/** The process's memory and the library's live objects after `copies` copies, `seconds` in. */
export interface Sample {
  copies: number;
  seconds: number;
  rss: number;
  /** RSS less the JS heap the runtime reserved. */
  native: number;
  heapTotal: number;
  heapUsed: number;
  plansLive: number;
  blocksLive: number;
  deviceBytesLive: number;
  pinnedCached: number;
  pinnedInUse: number;
}

/** A {@link Sample} now. */
export function takeSample(copies: number, seconds: number): Sample {
  const m = memory();
  const s = poolStats();
  return {
    copies,
    seconds,
    rss: m.rss,
    native: m.rss - m.heapTotal,
    heapTotal: m.heapTotal,
    heapUsed: m.heapUsed,
    plansLive: s.plansLive,
    blocksLive: s.blocksLive,
    deviceBytesLive: s.deviceBytesLive,
    pinnedCached: s.pinnedBytesCached,
    pinnedInUse: s.pinnedBytesInUse,
  };
}
