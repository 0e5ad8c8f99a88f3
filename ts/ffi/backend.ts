/**
 * What each runtime backend (bun.ts, deno.ts) provides to the library.
 *
 * @module
 */

import type { SymbolSpec } from "./symbols.ts";

/** Functions bound from a neutral table, before typing. */
export type BoundFunctions = Record<string, (...args: never[]) => unknown>;

/** One runtime's FFI, reduced to what libmtc's bindings use. */
export interface FfiBackend {
  readonly runtime: "bun" | "deno";
  /**
   * Opens the shared library at `path` and binds a neutral table (see
   * symbols.ts); throws the runtime's error on failure.
   */
  open(path: string, table: Readonly<Record<string, SymbolSpec>>): { symbols: BoundFunctions; close(): void };
  /**
   * The address of a typed array's first byte (byteOffset included). The
   * caller keeps the view alive while C may read it.
   */
  pointerOf(view: ArrayBufferView): number;
  /** Copies `into.byteLength` bytes from host memory at `address` into `into`. */
  copyFromAddress(address: number, into: Uint8Array): void;
  /** True when the file exists, false when not, undefined when it cannot tell. */
  fileExists(path: string): boolean | undefined;
}
