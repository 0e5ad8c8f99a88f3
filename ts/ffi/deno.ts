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

/** Handles are `usize`; Deno accepts numbers for 64-bit parameters. */
const ARG: Record<ArgKind, string> = {
  ptr: "usize",
  buffer: "buffer",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
};
/** 64-bit results come back as bigint and strings as pointers; adapt() converts both. */
const RESULT: Record<ResultKind, string> = {
  ptr: "usize",
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
  cstring: "pointer",
  void: "void",
};

function adapt(spec: SymbolSpec, raw: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  switch (spec.result) {
    case "cstring":
      return (...args) => {
        const p = raw(...args) as object | null;
        return p === null ? "" : deno().UnsafePointerView.getCString(p);
      };
    case "ptr":
    case "i64":
    case "u64":
      if (spec.nonblocking) return (...args) => (raw(...args) as Promise<unknown>).then(Number);
      return (...args) => Number(raw(...args));
    default:
      return raw;
  }
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
      if (fn !== null && fn !== undefined) bound[key] = adapt(spec, fn);
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
