/**
 * The neutral form of one C function of libmtc, which ts/ffi/bun.ts and
 * ts/ffi/deno.ts turn into each runtime's own (the kinds are described in
 * symbols.ts).
 *
 * @module
 */

/** Neutral parameter kinds. */
export type ArgKind = "ptr" | "buffer" | "i32" | "u32" | "i64" | "u64";
/** Neutral result kinds. */
export type ResultKind = "ptr" | "i32" | "u32" | "i64" | "u64" | "cstring" | "void";

/** One C function. */
export interface SymbolSpec {
  readonly args: readonly ArgKind[];
  readonly result: ResultKind;
  /** The C symbol, when it differs from the table key. */
  readonly name?: string;
  /** Bind as a call on a runtime thread returning a Promise (Deno). */
  readonly nonblocking?: boolean;
  /** The library may lack it (added after 0.1.0); the entry is then left out. */
  readonly optional?: boolean;
}
