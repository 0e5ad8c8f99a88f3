/**
 * The Deno backend: the neutral table in `Deno.dlopen` form.
 *
 * @module
 */

import type { BoundFunctions, FfiBackend, OpenedLibrary } from "./backend.ts";
import type { ArgKind, ResultKind, SymbolSpec } from "./symbols.ts";

/** The parts of the `Deno` namespace used here. */
interface DenoFfi {
  dlopen(
    path: string,
    symbols: Record<string, DenoSpec>,
  ): { symbols: Record<string, ((...args: unknown[]) => unknown) | null>; close(): void };
  UnsafePointer: {
    of(view: ArrayBufferView): unknown;
    value(pointer: unknown): bigint | number;
    create(value: bigint): object | null;
  };
  UnsafePointerView: {
    getCString(pointer: object): string;
    copyInto(pointer: object, destination: ArrayBufferView, offset?: number): void;
    getArrayBuffer(pointer: object, byteLength: number, offset?: number): ArrayBuffer;
  };
  statSync(path: string): unknown;
}

interface DenoSpec {
  parameters: string[];
  result: string;
  name?: string;
  nonblocking?: boolean;
  /** A missing symbol binds as null instead of failing the dlopen. */
  optional?: boolean;
}

function deno(): DenoFfi {
  return (globalThis as unknown as { Deno: DenoFfi }).Deno;
}

/**
 * Handles are `usize`. Deno accepts numbers for 64-bit parameters, but a
 * call given a number there leaves V8's fast path: see wide() below.
 */
const ARG: Record<ArgKind, string> = {
  ptr: "usize",
  buffer: "buffer",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
};
/** 64-bit results come back as bigint and strings as pointers; bind() converts both. */
const RESULT: Record<ResultKind, string> = {
  ptr: "usize",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
  cstring: "pointer",
  void: "void",
};

type Raw = (...args: unknown[]) => unknown;
type Convert = (value: unknown) => unknown;

const same: Convert = (value) => value;
const toNumber: Convert = (value) => Number(value);
const toText: Convert = (pointer) => pointer === null ? "" : deno().UnsafePointerView.getCString(pointer as object);

/** BigInts of 0 to 4,095 (counts, indices), made when the library is opened. */
const smallBigInts: bigint[] = [];
let lastNumber = -1;
let lastBigInt = -1n;

/**
 * A 64-bit argument as V8's fast call into Deno's FFI takes it: a bigint.
 * Given a number, V8 deoptimizes the optimized function that makes the call
 * ("not a BigInt"; it is optimized again later, and so on) and the call
 * takes Deno's slow path: about 70 ns against 5 ns with a bigint on a
 * 2-core VM, deno 2.9.6, besides the time the caller then spends
 * unoptimized. So a safe integer becomes a bigint: from a table below
 * 4,096, else the last one converted (a plan or block handle comes several
 * times in a row). Anything else is left for Deno to convert, as before.
 */
function wide(value: unknown): unknown {
  if (typeof value !== "number") return value;
  if (value >= 0 && value < 4096 && (value | 0) === value) return smallBigInts[value];
  if (value === lastNumber) return lastBigInt;
  if (!Number.isSafeInteger(value)) return value;
  lastNumber = value;
  lastBigInt = BigInt(value);
  return lastBigInt;
}

/**
 * `raw` with `c[i]` applied to argument i and `out` to the result, taking
 * exactly as many arguments as the C function (a call of another arity
 * leaves the fast path). A rest-and-spread wrapper costs more than the
 * conversion saves, so each arity has its own.
 */
function positional(raw: Raw, c: readonly Convert[], out: Convert): Raw {
  const [c0 = same, c1 = same, c2 = same, c3 = same, c4 = same, c5 = same, c6 = same, c7 = same, c8 = same, c9 = same, c10 = same] = c;
  switch (c.length) {
    case 0: return () => out(raw());
    case 1: return (a) => out(raw(c0(a)));
    case 2: return (a, b) => out(raw(c0(a), c1(b)));
    case 3: return (a, b, d) => out(raw(c0(a), c1(b), c2(d)));
    case 4: return (a, b, d, e) => out(raw(c0(a), c1(b), c2(d), c3(e)));
    case 5: return (a, b, d, e, f) => out(raw(c0(a), c1(b), c2(d), c3(e), c4(f)));
    case 6: return (a, b, d, e, f, g) => out(raw(c0(a), c1(b), c2(d), c3(e), c4(f), c5(g)));
    case 7: return (a, b, d, e, f, g, h) => out(raw(c0(a), c1(b), c2(d), c3(e), c4(f), c5(g), c6(h)));
    case 8: return (a, b, d, e, f, g, h, i) => out(raw(c0(a), c1(b), c2(d), c3(e), c4(f), c5(g), c6(h), c7(i)));
    case 9: return (a, b, d, e, f, g, h, i, j) => out(raw(c0(a), c1(b), c2(d), c3(e), c4(f), c5(g), c6(h), c7(i), c8(j)));
    case 10:
      return (a, b, d, e, f, g, h, i, j, k) => out(raw(c0(a), c1(b), c2(d), c3(e), c4(f), c5(g), c6(h), c7(i), c8(j), c9(k)));
    case 11:
      return (a, b, d, e, f, g, h, i, j, k, l) => out(raw(c0(a), c1(b), c2(d), c3(e), c4(f), c5(g), c6(h), c7(i), c8(j), c9(k), c10(l)));
    default:
      return (...args) => out(raw(...args.map((value, i) => (c[i] ?? same)(value))));
  }
}

/** The JavaScript function for one entry: 64-bit arguments as bigints, results as the neutral kinds say. */
function bind(spec: SymbolSpec, raw: Raw): Raw {
  const c = spec.args.map((kind) => kind === "ptr" || kind === "i64" || kind === "u64" ? wide : same);
  const widened = c.includes(wide);
  const numeric = spec.result === "ptr" || spec.result === "i64" || spec.result === "u64";
  if (spec.nonblocking) {
    // A Promise, from one of Deno's threads: never a fast call.
    const call = widened ? positional(raw, c, same) : raw;
    return numeric ? (...args) => (call(...args) as Promise<unknown>).then(Number) : call;
  }
  const out = spec.result === "cstring" ? toText : numeric ? toNumber : same;
  return widened || out !== same ? positional(raw, c, out) : raw;
}

/**
 * The address of a view's first byte. Deno.UnsafePointer.of costs about
 * 0.5 µs a call (266 µs for the 528 leaves of the example batch), while a
 * "buffer" argument of a fast FFI call costs about 40 ns; libc's memset(p, 0, 0)
 * writes nothing and returns p, so it serves as the identity function. Both
 * include the view's byteOffset (checked in tests/ts/library.test.ts).
 */
let addressOf = (view: ArrayBufferView): number => {
  let identity: ((view: ArrayBufferView, c: number, n: bigint) => bigint) | undefined;
  try {
    const libc = deno().dlopen("libc.so.6", {
      memset: { parameters: ["buffer" /* void *s */, "i32" /* int c */, "usize" /* size_t n */], result: "usize" /* void * */ },
    });
    identity = libc.symbols.memset as typeof identity;
  } catch {
    identity = undefined; // not glibc: the slower, portable way
  }
  const { UnsafePointer } = deno();
  addressOf = identity !== undefined
    ? (v) => Number(identity(v, 0, 0n))
    : (v) => Number(UnsafePointer.value(UnsafePointer.of(v)));
  return addressOf(view);
};

export const denoBackend: FfiBackend = {
  runtime: "deno",

  externalDeallocators: false,

  open(path: string, table: Readonly<Record<string, SymbolSpec>>): OpenedLibrary {
    for (let n = smallBigInts.length; n < 4096; n++) smallBigInts.push(BigInt(n));
    const specs: Record<string, DenoSpec> = {};
    for (const [key, spec] of Object.entries(table)) {
      specs[key] = {
        name: spec.name ?? key,
        parameters: spec.args.map((a) => ARG[a]),
        result: RESULT[spec.result],
        nonblocking: spec.nonblocking === true,
        optional: spec.optional === true,
      };
    }
    const lib = deno().dlopen(path, specs);
    const bound: Record<string, unknown> = {};
    for (const [key, spec] of Object.entries(table)) {
      const fn = lib.symbols[key];
      if (fn !== null && fn !== undefined) bound[key] = bind(spec, fn);
    }
    return {
      symbols: bound as BoundFunctions,
      functionAddress: () => undefined, // Deno does not expose symbol addresses; nothing needs them here
      close: () => lib.close(),
    };
  },

  pointerOf(view: ArrayBufferView): number {
    if (view.byteLength === 0) return 0;
    return addressOf(view);
  },

  copyFromAddress(address: number, into: Uint8Array): void {
    if (into.byteLength === 0) return;
    const { UnsafePointer, UnsafePointerView } = deno();
    UnsafePointerView.copyInto(UnsafePointer.create(BigInt(address))!, into);
  },

  externalBuffer(address: number, byteLength: number): ArrayBuffer {
    const { UnsafePointer, UnsafePointerView } = deno();
    return UnsafePointerView.getArrayBuffer(UnsafePointer.create(BigInt(address))!, byteLength);
  },

  fileExists(path: string): boolean | undefined {
    try {
      deno().statSync(path);
      return true;
    } catch (e) {
      return (e as { name?: string }).name === "NotFound" ? false : undefined;
    }
  },
};
