/**
 * MTC_TRACE_FFI=1: wraps every bound function to log its arguments, result
 * and duration to stderr (console.error). For debugging, not for speed.
 *
 * @module
 */

import type { NativeSymbols } from "./symbols.ts";

function show(value: unknown): string {
  if (ArrayBuffer.isView(value)) return `<${value.constructor.name} ${value.byteLength}B>`;
  if (typeof value === "string") return JSON.stringify(value);
  return String(value);
}

function micros(since: number): string {
  return `${((performance.now() - since) * 1000).toFixed(1)}µs`;
}

/** Returns a table whose functions log each call. */
export function traceSymbols(symbols: NativeSymbols): NativeSymbols {
  const traced: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(symbols) as unknown as [string, ((...a: unknown[]) => unknown) | undefined][]) {
    if (fn === undefined) continue;
    traced[name] = (...args: unknown[]) => {
      const t0 = performance.now();
      const call = `[mtc ffi] ${name}(${args.map(show).join(", ")})`;
      const result = fn(...args);
      if (result instanceof Promise) {
        console.error(`${call} -> Promise (${micros(t0)})`);
        return result.then((r) => {
          console.error(`${call} settled -> ${show(r)} (${micros(t0)})`);
          return r;
        });
      }
      console.error(`${call} -> ${show(result)} (${micros(t0)})`);
      return result;
    };
  }
  return traced as unknown as NativeSymbols;
}
