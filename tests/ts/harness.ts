/**
 * One test body for `bun test` and `deno test`: `test()` maps to bun:test's
 * `test` or to `Deno.test`, plus a few assertions (no JSR imports: the test
 * machines may have no network).
 *
 * @module
 */

/** Options of one test. */
export interface TestOptions {
  /** Skip the test; a string says why (printed once). */
  skip?: boolean | string;
  /** Milliseconds before the test fails (Bun; Deno has no per-test timeout). */
  timeout?: number;
  /**
   * Deno: check for leaked async ops (default true). The resource sanitizer
   * is always off: libmtc is opened once per process and stays open, which
   * it would report as a leak of whichever test loaded it first.
   */
  sanitize?: boolean;
}

type Body = () => void | Promise<void>;

interface BunTestModule {
  test: ((name: string, fn: Body, timeout?: number) => void) & { skip(name: string, fn: Body): void };
}
interface DenoTestLike {
  test(def: { name: string; fn: Body; ignore?: boolean; sanitizeOps?: boolean; sanitizeResources?: boolean }): void;
}

const g = globalThis as unknown as { Bun?: unknown; Deno?: DenoTestLike };

/** "bun" or "deno": the runner these tests are in. */
export const runner: "bun" | "deno" = g.Bun !== undefined ? "bun" : "deno";

let bunTest: BunTestModule | undefined;

/**
 * Registers a test with the running test runner.
 *
 * @example
 * ```ts
 * test("adds", () => assertEquals(1 + 1, 2));
 * ```
 */
export function test(name: string, fn: Body, options: TestOptions = {}): void {
  const skip = options.skip !== undefined && options.skip !== false;
  if (runner === "bun") {
    bunTest ??= (import.meta as unknown as { require(id: string): BunTestModule }).require("bun:test");
    if (skip) bunTest.test.skip(name, fn);
    else bunTest.test(name, fn, options.timeout ?? 30_000);
  } else {
    g.Deno!.test({ name, fn, ignore: skip, sanitizeOps: options.sanitize ?? true, sanitizeResources: false });
  }
}

/** Thrown by failed assertions. */
export class AssertionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AssertionError";
  }
}

/** Fails unless `condition` is truthy. */
export function assert(condition: unknown, message = "assertion failed"): asserts condition {
  if (!condition) throw new AssertionError(message);
}

/** Fails unless `actual` and `expected` are the same value (Object.is). */
export function assertSame(actual: unknown, expected: unknown, message?: string): void {
  if (!Object.is(actual, expected)) {
    throw new AssertionError(message ?? `expected the same value:\n  actual:   ${show(actual)}\n  expected: ${show(expected)}`);
  }
}

function show(value: unknown): string {
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "string") return JSON.stringify(value);
  if (ArrayBuffer.isView(value)) {
    const items = Array.from(value as unknown as ArrayLike<unknown>).slice(0, 8).map(show).join(", ");
    return `${value.constructor.name}(${(value as unknown as ArrayLike<unknown>).length ?? value.byteLength}) [${items}...]`;
  }
  if (value instanceof Map) return `Map(${value.size})`;
  if (Array.isArray(value)) return `Array(${value.length})`;
  if (typeof value === "object" && value !== null) return value.constructor?.name ?? "Object";
  return String(value);
}

/** Why a and b differ, or null when they are deeply equal. */
function difference(a: unknown, b: unknown, path: string, seen: Map<object, object>): string | null {
  if (Object.is(a, b)) return null;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) {
    return `${path || "(root)"}: ${show(a)} !== ${show(b)}`;
  }
  if (seen.get(a) === b) return null;
  seen.set(a, b);
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) {
    return `${path || "(root)"}: ${show(a)} and ${show(b)} have different prototypes`;
  }
  if (ArrayBuffer.isView(a)) {
    const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    const bv = b as ArrayBufferView;
    const y = new Uint8Array(bv.buffer, bv.byteOffset, bv.byteLength);
    if (x.length !== y.length) return `${path || "(root)"}: byte lengths ${x.length} !== ${y.length}`;
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i]) return `${path || "(root)"}: ${show(a)} !== ${show(b)} (byte ${i})`;
    }
    return null;
  }
  if (a instanceof Map) {
    const m = b as Map<unknown, unknown>;
    if (a.size !== m.size) return `${path}: Map sizes ${a.size} !== ${m.size}`;
    const ka = [...a.keys()];
    const kb = [...m.keys()];
    for (let i = 0; i < ka.length; i++) {
      if (!Object.is(ka[i], kb[i])) return `${path}: Map key #${i} ${show(ka[i])} !== ${show(kb[i])}`;
      const d = difference(a.get(ka[i]), m.get(ka[i]), `${path}[${show(ka[i])}]`, seen);
      if (d !== null) return d;
    }
    return null;
  }
  if (a instanceof Set) {
    const s = b as Set<unknown>;
    if (a.size !== s.size) return `${path}: Set sizes ${a.size} !== ${s.size}`;
    for (const v of a) if (!s.has(v)) return `${path}: Set lacks ${show(v)}`;
    return null;
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) {
    return `${path || "(root)"}: keys [${ka.join(", ")}] !== [${kb.join(", ")}]`;
  }
  for (const k of ka) {
    const d = difference(
      (a as Record<string, unknown>)[k],
      (b as Record<string, unknown>)[k],
      Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`,
      seen,
    );
    if (d !== null) return d;
  }
  return null;
}

/**
 * Fails unless `actual` deeply equals `expected`: same prototypes, same own
 * keys in the same order, typed arrays and DataViews byte for byte, Maps key
 * by key in order.
 */
export function assertEquals(actual: unknown, expected: unknown, message?: string): void {
  const d = difference(actual, expected, "", new Map());
  if (d !== null) throw new AssertionError(message ? `${message}: ${d}` : `not equal: ${d}`);
}

type ErrorClass<E extends Error> = abstract new (...args: never[]) => E;

function checkError<E extends Error>(e: unknown, ErrorType: ErrorClass<E>, includes?: string): E {
  if (!(e instanceof ErrorType)) {
    throw new AssertionError(`expected a ${ErrorType.name}, got ${e instanceof Error ? `${e.name}: ${e.message}` : show(e)}`);
  }
  if (includes !== undefined && !e.message.includes(includes)) {
    throw new AssertionError(`expected the message to include ${JSON.stringify(includes)}, got ${JSON.stringify(e.message)}`);
  }
  return e;
}

/** Fails unless `fn` throws an `ErrorType` whose message includes `includes`; returns the error. */
export function assertThrows<E extends Error>(fn: () => unknown, ErrorType: ErrorClass<E>, includes?: string): E {
  try {
    fn();
  } catch (e) {
    return checkError(e, ErrorType, includes);
  }
  throw new AssertionError(`expected ${ErrorType.name} to be thrown`);
}

/** Fails unless `fn()` rejects with an `ErrorType` whose message includes `includes`; returns the error. */
export async function assertRejects<E extends Error>(
  fn: () => PromiseLike<unknown>,
  ErrorType: ErrorClass<E>,
  includes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (e) {
    return checkError(e, ErrorType, includes);
  }
  throw new AssertionError(`expected ${ErrorType.name} to be rejected`);
}

/** Reads an environment variable in either runtime (undefined when unset or not permitted). */
export function env(name: string): string | undefined {
  try {
    const d = g as unknown as { Deno?: { env: { get(n: string): string | undefined } } };
    if (runner === "deno") return d.Deno!.env.get(name);
    return (globalThis as unknown as { process: { env: Record<string, string | undefined> } }).process.env[name];
  } catch {
    return undefined;
  }
}

const printed = new Set<string>();

/** Prints a line once per process (skip notices). */
export function note(line: string): void {
  if (printed.has(line)) return;
  printed.add(line);
  console.log(line);
}
