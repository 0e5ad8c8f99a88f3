/**
 * The Bun backend: the neutral table in `bun:ffi` form.
 *
 * @module
 */

import { bunRequire } from "../runtime.ts";
import type { BoundFunctions, FfiBackend } from "./backend.ts";
import type { ArgKind, ResultKind, SymbolSpec } from "./symbols.ts";

/** The parts of `bun:ffi` used here. */
interface BunFfi {
  dlopen(
    path: string,
    symbols: Record<string, { args: string[]; returns: string }>,
  ): { symbols: Record<string, (...args: unknown[]) => unknown>; close(): void };
  ptr(view: ArrayBufferView): number;
  toArrayBuffer(address: number, byteOffset: number, byteLength: number): ArrayBuffer;
}

/** Handles and 64-bit integers are `u64` in, numbers out (`*_fast` gives a number whenever it fits). */
const ARG: Record<ArgKind, string> = {
  ptr: "u64",
  buffer: "ptr", // bun:ffi passes a TypedArray's data pointer for a ptr argument
  i32: "i32",
  u32: "u32",
  i64: "i64",
  u64: "u64",
};
const RESULT: Record<ResultKind, string> = {
  ptr: "u64_fast",
  i32: "i32",
  u32: "u32",
  i64: "i64_fast",
  u64: "u64_fast",
  cstring: "cstring",
  void: "void",
};

let ffi: BunFfi | undefined;
function bunFfi(): BunFfi {
  return (ffi ??= bunRequire<BunFfi>("bun:ffi", import.meta));
}

function toNumber(value: unknown): number {
  return typeof value === "bigint" ? Number(value) : (value as number);
}

/** Wraps a raw function only where its result needs converting. */
function adapt(spec: SymbolSpec, raw: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  switch (spec.result) {
    case "cstring":
      // A CString (or string, or null for a NULL pointer) → a primitive string.
      return (...args) => {
        const s = raw(...args);
        return s === null || s === undefined ? "" : String(s);
      };
    case "ptr":
    case "i64":
    case "u64":
      return (...args) => toNumber(raw(...args));
    default:
      return raw;
  }
}

export const bunBackend: FfiBackend = {
  runtime: "bun",

  open(path: string, table: Readonly<Record<string, SymbolSpec>>) {
    const specs: Record<string, { args: string[]; returns: string }> = {};
    for (const [key, spec] of Object.entries(table)) {
      if (spec.nonblocking) continue; // Bun has no nonblocking calls; the handle polls instead
      specs[spec.name ?? key] = { args: spec.args.map((a) => ARG[a]), returns: RESULT[spec.result] };
    }
    const lib = bunFfi().dlopen(path, specs);
    const bound: Record<string, unknown> = {};
    for (const [key, spec] of Object.entries(table)) {
      if (spec.nonblocking) continue;
      bound[key] = adapt(spec, lib.symbols[spec.name ?? key]!);
    }
    return { symbols: bound as BoundFunctions, close: () => lib.close() };
  },

  pointerOf(view: ArrayBufferView): number {
    if (view.byteLength === 0) return 0;
    // Touching .buffer moves a small typed array's storage out of the GC heap,
    // so the address stays valid for as long as the view is alive.
    void view.buffer;
    return bunFfi().ptr(view);
  },

  copyFromAddress(address: number, into: Uint8Array): void {
    if (into.byteLength === 0) return;
    into.set(new Uint8Array(bunFfi().toArrayBuffer(address, 0, into.byteLength)));
  },

  fileExists(path: string): boolean | undefined {
    try {
      return bunRequire<{ existsSync(p: string): boolean }>("node:fs", import.meta).existsSync(path);
    } catch {
      return undefined;
    }
  },
};
