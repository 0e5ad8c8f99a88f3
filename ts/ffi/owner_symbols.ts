/**
 * The part of libmtc's symbol table (symbols.ts) for owners, refs and
 * parcels (lib/include/mtc.h, "owners"): what a thread holds, given back
 * when it exits, and results handed between threads. Owner and ref ids are
 * below 2^53, so they travel as plain numbers ("u64"); out-parameters and
 * the refs of mtc_ref_move are BigUint64Arrays ("buffer"). The parcel calls
 * a receiver uses (describe, take, drop) came after 0.1.0, as did the wait
 * for a pinned block that moveResult makes.
 *
 * @module
 */

import type { SymbolSpec } from "./spec.ts";

export const ownerSymbols = {
  mtc_owner_create: {
    optional: true,
    args: [
      "u32", /* uint32_t flags */
      "u64", /* mtc_owner sender */
      "buffer", /* mtc_owner *out */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_owner_release: { optional: true, args: ["u64" /* mtc_owner owner */], result: "i32" /* mtc_status */ },
  mtc_owner_alive: { optional: true, args: ["u64" /* mtc_owner owner */], result: "i32" /* int32_t */ },
  mtc_owner_ref_count: { optional: true, args: ["u64" /* mtc_owner owner */], result: "i64" /* int64_t */ },
  mtc_parcels_live: { optional: true, args: [], result: "u64" /* uint64_t */ },
  mtc_ref_retain_block: {
    optional: true,
    args: [
      "u64", /* mtc_owner owner */
      "ptr", /* mtc_block *block */
    ],
    result: "u64", /* mtc_ref */
  },
  mtc_ref_adopt: {
    optional: true,
    args: [
      "u64", /* mtc_owner owner */
      "u32", /* uint32_t kind */
      "ptr", /* void *object */
    ],
    result: "u64", /* mtc_ref */
  },
  mtc_ref_release: { optional: true, args: ["u64" /* mtc_ref ref */], result: "void" },
  // Bound for its address (Bun's toArrayBuffer deallocator), not called from JS.
  mtc_ref_release_callback: {
    optional: true,
    args: [
      "ptr", /* void *bytes (ignored) */
      "ptr", /* void *ref */
    ],
    result: "void",
  },
  mtc_ref_move: {
    optional: true,
    args: [
      "u64", /* mtc_owner from */
      "u64", /* mtc_owner to */
      "buffer", /* mtc_ref *refs (read, then the new refs written back) */
      "u32", /* uint32_t count */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_owner_take: {
    optional: true,
    args: [
      "u64", /* mtc_owner parcel */
      "u64", /* mtc_owner to */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_owner_drop_parcels: { optional: true, args: ["u64" /* mtc_owner sender */], result: "u64" /* uint64_t */ },
  mtc_parcel_describe: {
    optional: true,
    args: [
      "u64", /* mtc_owner parcel */
      "buffer", /* mtc_parcel_entry *out (48 bytes each) */
      "u32", /* uint32_t capacity */
      "buffer", /* uint32_t *count */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_parcel_take: {
    optional: true,
    args: [
      "u64", /* mtc_owner parcel */
      "u64", /* mtc_owner to */
      "buffer", /* const mtc_ref *refs */
      "u32", /* uint32_t count */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_parcel_drop: { optional: true, args: ["u64" /* mtc_owner parcel */], result: "i32" /* mtc_status */ },
  mtc_block_wait_idle: { optional: true, args: ["ptr" /* mtc_block *block */], result: "i32" /* mtc_status */ },
} as const satisfies Record<string, SymbolSpec>;
