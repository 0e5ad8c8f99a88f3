/**
 * The part of libmtc's symbol table (symbols.ts) for prepared copies
 * (lib/include/mtc/prepared.h): a plan's structure laid out once, then each
 * batch of that structure made into a plan and submitted by one call. All
 * came after 0.1.0. The leaves and destinations are arrays of mtc_leaf
 * ("buffer"; destinations may be null: the prepared copy's own), and the
 * out-parameters one pointer each.
 *
 * @module
 */

import type { SymbolSpec } from "./spec.ts";

export const preparedSymbols = {
  mtc_prepared_create: {
    optional: true,
    args: [
      "ptr", /* mtc_plan *plan */
      "buffer", /* mtc_prepared **out */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_prepared_submit: {
    optional: true,
    args: [
      "ptr", /* mtc_prepared *prepared */
      "buffer", /* const mtc_leaf *leaves */
      "buffer", /* const mtc_leaf *destinations (may be NULL) */
      "u64", /* uint64_t count */
      "buffer", /* mtc_plan **out_plan */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_prepared_plan: {
    optional: true,
    args: [
      "ptr", /* mtc_prepared *prepared */
      "buffer", /* const mtc_leaf *leaves */
      "buffer", /* const mtc_leaf *destinations (may be NULL) */
      "u64", /* uint64_t count */
      "buffer", /* mtc_plan **out_plan */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_prepared_leaf_count: { optional: true, args: ["ptr" /* const mtc_prepared *prepared */], result: "u64" /* uint64_t */ },
  mtc_prepared_release: { optional: true, args: ["ptr" /* mtc_prepared *prepared */], result: "void" },
} as const satisfies Record<string, SymbolSpec>;
