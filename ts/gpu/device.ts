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

/**
 * True when `value` is a device string copies accept: "cpu", "cuda" or
 * "cuda:N" (N a CUDA device ordinal, written without leading zeros). It
 * says nothing of whether this machine has that device. Runs none of the
 * caller's code. Exported from mod.ts.
 *
 * @example
 * ```ts
 * const wanted: unknown = config.device;   // read from a file
 * const device = isDevice(wanted) ? wanted : "cpu"; // a Device
 * ```
 */
export function isDevice(value: unknown): value is Device {
  if (value === "cpu" || value === "cuda") return true;
  if (typeof value !== "string") return false;
  const match = CUDA_N.exec(value);
  return match !== null && Number(match[1]) <= 0x7fffffff;
}

/**
 * `value` as a {@link Device}, for a device string read at run time (a
 * command line, an environment variable, a config file); anything else
 * throws MtcError (MTC_ERR_INVALID_ARGUMENT) naming the value and what is
 * accepted. Exported from mod.ts as `parseDevice` (inside the library,
 * `parseDevice` gives the C device number).
 *
 * @example
 * ```ts
 * const device = parseDevice(args[0] ?? "cuda:0"); // "cpu" | "cuda" | `cuda:${number}`
 * await startCopy(batch, device);
 * ```
 */
export function checkDevice(value: unknown): Device {
  parseDevice(value, "parseDevice: ");
  return value as Device;
}

/** The device string for a C device number: "cpu" or "cuda:N". */
export function deviceName(device: number): Device {
  if (device === DEVICE_CPU) return "cpu";
  // Cached: results come by the hundred, and each new string costs ~20 ns.
  return device < NAMES.length ? NAMES[device]! : `cuda:${device}`;
}

const NAMES: Device[] = Array.from({ length: 64 }, (_, i) => `cuda:${i}` as Device);
