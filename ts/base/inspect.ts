/**
 * What console.log shows for the library's objects, in both runtimes: Bun
 * (and Node's util.inspect) call `Symbol.for("nodejs.util.inspect.custom")`,
 * Deno calls `Symbol.for("Deno.customInspect")`. Each class says what it is
 * in one line from its private state (`DeviceTensor(float32 [2, 3] cuda:0)`),
 * without calling C, running the caller's code, or throwing: a disposed
 * object is shown as disposed, not as an error. The same line is its
 * `toString()` (a template string) and its `toJSON()` (JSON.stringify), as
 * a URL's or a Date's is.
 *
 * @module
 */

const NODE_INSPECT = Symbol.for("nodejs.util.inspect.custom");
const DENO_INSPECT = Symbol.for("Deno.customInspect");

/** Formats a nested value as the runtime's console would (given by the runtime to a custom inspect). */
export type InspectNested = (value: unknown) => string;

type RuntimeInspect = (value: unknown, options?: unknown) => string;

/**
 * Gives the instances of a class (`prototype`) a custom inspect in both
 * runtimes: `show(value, nested)` returns what console.log prints. Should
 * `show` throw all the same, `name` and the reason are printed instead.
 * With `asText` (the default), the same line is also their `toString()`
 * and `toJSON()`; an error class keeps Error's toString.
 */
export function defineInspect<T>(prototype: object, name: string, show: (value: T, nested: InspectNested) => string, asText = true): void {
  const safe = (value: T, runtimeInspect: RuntimeInspect | undefined, options: unknown): string => {
    const nested: InspectNested = (v) => (typeof runtimeInspect === "function" ? runtimeInspect(v, options) : String(v));
    try {
      return show(value, nested);
    } catch (e) {
      return `${name} (unreadable: ${e instanceof Error ? e.message : "?"})`;
    }
  };
  Object.defineProperty(prototype, NODE_INSPECT, {
    value(this: T, _depth: unknown, options: unknown, runtimeInspect?: RuntimeInspect) {
      return safe(this, runtimeInspect, options);
    },
    writable: true,
    configurable: true,
  });
  Object.defineProperty(prototype, DENO_INSPECT, {
    value(this: T, runtimeInspect?: RuntimeInspect, options?: unknown) {
      return safe(this, runtimeInspect, options);
    },
    writable: true,
    configurable: true,
  });
  if (!asText) return;
  for (const key of ["toString", "toJSON"]) {
    Object.defineProperty(prototype, key, {
      value(this: T): string {
        return safe(this, undefined, undefined);
      },
      writable: true,
      configurable: true,
    });
  }
}

/** `count` with its noun: "1 leaf", "12 leaves". */
export function counted(count: number, one: string, many: string): string {
  return `${count} ${count === 1 ? one : many}`;
}
