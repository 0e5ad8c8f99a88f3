/**
 * What each runtime backend (bun.ts, deno.ts) provides to the library.
 *
 * @module
 */

import type { SymbolSpec } from "./symbols.ts";

/** Functions bound from a neutral table, before typing. */
export type BoundFunctions = Record<string, (...args: never[]) => unknown>;

/** A library opened by a backend. */
export interface OpenedLibrary {
  /** The table's functions that the library has, by name. */
  readonly symbols: BoundFunctions;
  /**
   * The address of a bound C function (for C callbacks such as Bun's
   * toArrayBuffer deallocator), or undefined where the runtime does not
   * expose it (Deno) or the library lacks the function.
   */
  functionAddress(key: string): number | undefined;
  /** Closes this handle (the library stays mapped while other handles or its threads use it). */
  close(): void;
}

/** One runtime's FFI, reduced to what libmtc's bindings use. */
export interface FfiBackend {
  /** The runtime this backend serves. */
  readonly runtime: "bun" | "deno";
  /** True where externalBuffer takes a C deallocator (Bun). */
  readonly externalDeallocators: boolean;
  /**
   * Opens the shared library at `path` and binds a neutral table (see
   * symbols.ts); throws the runtime's error on failure. Entries marked
   * `optional` that the library lacks are left out of `symbols`.
   */
  open(path: string, table: Readonly<Record<string, SymbolSpec>>): OpenedLibrary;
  /**
   * The address of a typed array's first byte (byteOffset included). The
   * caller keeps the view alive while C may read it. `bufferRead`: the
   * caller has just read `view.buffer` (which pins a Bun view's storage), so
   * the backend need not.
   */
  pointerOf(view: ArrayBufferView, bufferRead?: boolean): number;
  /** Copies `into.byteLength` bytes from host memory at `address` into `into`. */
  copyFromAddress(address: number, into: Uint8Array): void;
  /**
   * An ArrayBuffer over `byteLength` bytes of host memory at `address`
   * (not copied). With `deallocator` (Bun only), the runtime calls the C
   * function at `deallocator.address` as `(bytes, context)` once the
   * buffer is collected or detached. Only where `externalDeallocators` is
   * true; Deno has no such hook (callers use a FinalizationRegistry).
   */
  externalBuffer(address: number, byteLength: number, deallocator?: { address: number; context: number }): ArrayBuffer;
  /** True when the file exists, false when not, undefined when it cannot tell. */
  fileExists(path: string): boolean | undefined;
}
