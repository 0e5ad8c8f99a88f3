/**
 * The part of libmtc's symbol table (symbols.ts) for memory the caller
 * holds and the caller's own kernels: DeviceTensor.empty / zeros, pinned
 * host tensors and arenas, Module, Kernel (lib/include/mtc.h, "device
 * memory and kernels", "pinned host memory").
 *
 * @module
 */

import type { SymbolSpec } from "./spec.ts";

export const kernelSymbols = {
  mtc_device_block_alloc: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t bytes */
      "u32", /* uint32_t flags */
      "buffer", /* mtc_block **out_block */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_host_block_alloc: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "u64", /* uint64_t bytes */
      "buffer", /* mtc_block **out_block */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_block_busy: { optional: true, args: ["ptr" /* mtc_block *block */], result: "i32" },
  mtc_set_pinned_held_limit: {
    optional: true,
    args: ["u64" /* uint64_t bytes */],
    result: "i32", /* mtc_status */
  },
  mtc_module_load: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "buffer", /* const void *image */
      "u64", /* uint64_t bytes */
      "buffer", /* mtc_module **out_module */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_module_unload: { optional: true, args: ["ptr" /* mtc_module *module */], result: "void" },
  mtc_module_get_function: {
    optional: true,
    args: [
      "ptr", /* mtc_module *module */
      "buffer", /* const char *name */
      "buffer", /* uint64_t *out_function */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_kernel_launch: {
    optional: true,
    args: [
      "ptr", /* mtc_module *module */
      "u64", /* uint64_t function */
      "u64", /* uint64_t stream */
      "buffer", /* const uint32_t *dims */
      "buffer", /* const void *params */
      "u64", /* uint64_t params_bytes */
      "buffer", /* const uint32_t *param_offsets */
      "u32", /* uint32_t param_count */
      "buffer", /* mtc_block *const *blocks */
      "u32", /* uint32_t block_count */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_launches_settle: { optional: true, args: ["i32" /* int32_t wait */], result: "u32" /* uint32_t */ },
} as const satisfies Record<string, SymbolSpec>;
