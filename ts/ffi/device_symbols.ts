/**
 * The part of libmtc's symbol table (symbols.ts) that asks the CUDA driver
 * about the devices and itself (lib/include/mtc/devices.h): names, memory,
 * peer access, the driver's version and file, for the doctor. All came
 * after 0.1.0.
 *
 * @module
 */

import type { SymbolSpec } from "./spec.ts";

export const deviceSymbols = {
  mtc_cuda_device_describe: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "buffer", /* char *name */
      "u64", /* size_t name_size */
      "buffer", /* uint64_t *out_total_bytes */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_cuda_can_access_peer: {
    optional: true,
    args: [
      "i32", /* int32_t device */
      "i32", /* int32_t peer */
      "buffer", /* int32_t *out_can */
    ],
    result: "i32", /* mtc_status */
  },
  mtc_cuda_driver_version: {
    optional: true,
    args: ["buffer" /* int32_t *out_version */],
    result: "i32", /* mtc_status */
  },
  mtc_cuda_driver_file: { optional: true, args: [], result: "cstring" /* const char * */ },
} as const satisfies Record<string, SymbolSpec>;
