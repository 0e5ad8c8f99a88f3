/**
 * What the soak runs share: the process's memory as the runtime reports it,
 * a forced collection where the runtime allows one, and MiB for printing.
 *
 * @module
 */

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
