/**
 * Whether the GPU suite can run here: a CUDA device found through the real
 * driver, or the emulated one through MTC_CUDA_DRIVER. tests/gpu/gpu_env.ts
 * skips the suite for the reason this gives; scripts/test.sh runs this file
 * first to know whether to expect a skipped suite (which it then reports in
 * one line) or a run (whose output it streams).
 *
 *   bun tests/gpu/device_check.ts     prints the reason the suite skips, or nothing
 *
 * @module
 */

import { cudaDeviceCount, cudaUnavailableReason } from "../../ts/mod.ts";

/** Why the GPU suite cannot run here, or undefined when a CUDA device is found. */
export function gpuSkipReason(): string | undefined {
  try {
    if (cudaDeviceCount() > 0) return undefined;
    return `no CUDA device: ${cudaUnavailableReason()} (set MTC_CUDA_DRIVER to use the emulated driver)`;
  } catch (e) {
    return `libmtc could not be loaded: ${e instanceof Error ? e.message : String(e)}`;
  }
}

if (import.meta.main) console.log(gpuSkipReason() ?? "");
