/**
 * The Bun backend: the neutral table in `bun:ffi` form.
 *
 * @module
 */

import { bunRequire } from "../base/runtime.ts";
import { bufferUnder } from "../base/views.ts";
import type { BoundFunctions, FfiBackend, OpenedLibrary } from "./backend.ts";
import type { ArgKind, ResultKind, SymbolSpec } from "./symbols.ts";

/** The parts of `bun:ffi` used here. */
interface BunFfi {
  dlopen(path: string, symbols: Record<string, BunSpec>): BunLibrary;
  ptr(view: ArrayBufferView): number;
  /** With a context and a deallocator (bun-types declares the first three parameters only). */
  toArrayBuffer(
    address: number,
    byteOffset: number,
    byteLength: number,
    deallocatorContext?: number,
    deallocator?: number,
  ): ArrayBuffer;
}

interface BunSpec {
  args: string[];
  returns: string;
}

/** A bound function; Bun gives each its C address as `.ptr`. */
type BunFunction = ((...args: unknown[]) => unknown) & { readonly ptr?: number | bigint };

interface BunLibrary {
  symbols: Record<string, BunFunction>;
  close(): void;
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

  externalDeallocators: true,

  open(path: string, table: Readonly<Record<string, SymbolSpec>>): OpenedLibrary {
    const specs: Record<string, BunSpec> = {};
    let optional = 0;
    for (const [key, spec] of Object.entries(table)) {
      if (spec.nonblocking) continue; // Bun has no nonblocking calls; the handle polls instead
      specs[spec.name ?? key] = { args: spec.args.map((a) => ARG[a]), returns: RESULT[spec.result] };
      if (spec.optional) optional++;
    }
    const ffi = bunFfi();
    const libs: BunLibrary[] = [];
    const raw: Record<string, BunFunction> = {};
    try {
      libs.push(ffi.dlopen(path, specs));
      Object.assign(raw, libs[0]!.symbols);
    } catch (error) {
      // Bun's dlopen fails as a whole when one symbol is missing: bind the
      // required ones together (rethrowing that failure), then each optional
      // one on its own, leaving out those the library lacks (an older libmtc).
      if (optional === 0) throw error;
      const required: Record<string, BunSpec> = {};
      for (const [key, spec] of Object.entries(table)) {
        if (!spec.nonblocking && !spec.optional) required[spec.name ?? key] = specs[spec.name ?? key]!;
      }
      libs.push(ffi.dlopen(path, required));
      Object.assign(raw, libs[0]!.symbols);
      for (const [key, spec] of Object.entries(table)) {
        if (spec.nonblocking || !spec.optional) continue;
        const name = spec.name ?? key;
        try {
          const one = ffi.dlopen(path, { [name]: specs[name]! });
          libs.push(one);
          raw[name] = one.symbols[name]!;
        } catch {
          // absent: the feature reports MTC_ERR_UNSUPPORTED
        }
      }
    }
    const bound: Record<string, unknown> = {};
    for (const [key, spec] of Object.entries(table)) {
      const fn = spec.nonblocking ? undefined : raw[spec.name ?? key];
      if (fn !== undefined) bound[key] = adapt(spec, fn);
    }
    return {
      symbols: bound as BoundFunctions,
      functionAddress(key: string): number | undefined {
        const spec = table[key];
        const fn = spec === undefined ? undefined : raw[spec.name ?? key];
        return fn?.ptr === undefined ? undefined : Number(fn.ptr);
      },
      close: () => {
        for (const lib of libs) lib.close();
      },
    };
  },

  pointerOf(view: ArrayBufferView, bufferRead = false): number {
    // Touching .buffer (the engine's getter: an own property cannot stand in)
    // moves a small typed array's storage out of the GC heap, so the address
    // stays valid for as long as the view is alive.
    if (!bufferRead) bufferUnder(view);
    // For a view of no bytes (by the engine's own length) ptr gives back a TypeError, not an address.
    const address: unknown = bunFfi().ptr(view);
    return typeof address === "number" ? address : 0;
  },

  copyFromAddress(address: number, into: Uint8Array): void {
    if (into.byteLength === 0) return;
    into.set(new Uint8Array(bunFfi().toArrayBuffer(address, 0, into.byteLength)));
  },

  externalBuffer(address: number, byteLength: number, deallocator?: { address: number; context: number }): ArrayBuffer {
    if (deallocator === undefined) return bunFfi().toArrayBuffer(address, 0, byteLength);
    return bunFfi().toArrayBuffer(address, 0, byteLength, deallocator.context, deallocator.address);
  },

  fileExists(path: string): boolean | undefined {
    try {
      return bunRequire<{ existsSync(p: string): boolean }>("node:fs", import.meta).existsSync(path);
    } catch {
      return undefined;
    }
  },
};
