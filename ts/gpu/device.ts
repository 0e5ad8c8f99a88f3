/**
 * Device strings: "cpu", "cuda" (the current CUDA device) and "cuda:N".
 *
 * @module
 */

import { invalidArgument } from "../base/errors.ts";

/** Where a copy goes: host memory, the current CUDA device, or CUDA device N. */
export type Device = "cpu" | "cuda" | `cuda:${number}`;

/** The `mtc_leaf.device` value for host memory (MTC_DEVICE_CPU). */
export const DEVICE_CPU: number = -1;

/** Means "the calling thread's current CUDA device", resolved at startCopy time. */
export const CURRENT_CUDA: number = -2;

const CUDA_N = /^cuda:(0|[1-9][0-9]{0,9})$/;

/**
 * Parses a device string into the C library's device number: -1 for "cpu",
 * N for "cuda:N", and {@link CURRENT_CUDA} for "cuda" (which needs the
 * library to resolve). Anything else throws an MtcError naming the string,
 * its message starting with `where` (the call's name and ": ", or "").
 *
 * @example
 * ```ts
 * parseDevice("cuda:1"); // 1
 * parseDevice("cpu");    // -1
 * ```
 */
export function parseDevice(device: unknown, where = ""): number {
  if (device === "cpu") return DEVICE_CPU;
  if (device === "cuda") return CURRENT_CUDA;
  if (typeof device === "string") {
    const match = CUDA_N.exec(device);
    if (match !== null) {
      const index = Number(match[1]);
      if (index <= 0x7fffffff) return index;
    }
  }
  const shown = typeof device === "string" ? JSON.stringify(device) : String(device);
  throw invalidArgument(
    `${where}invalid device ${shown}: expected "cpu", "cuda" or "cuda:N" (N a CUDA device ordinal)`,
  );
}

/** The device string for a C device number: "cpu" or "cuda:N". */
export function deviceName(device: number): Device {
  if (device === DEVICE_CPU) return "cpu";
  // Cached: results come by the hundred, and each new string costs ~20 ns.
  return device < NAMES.length ? NAMES[device]! : `cuda:${device}`;
}

const NAMES: Device[] = Array.from({ length: 64 }, (_, i) => `cuda:${i}` as Device);
