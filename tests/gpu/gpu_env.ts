/**
 * What every GPU suite file shares: whether a CUDA device is there (the
 * real driver, or the emulated one through MTC_CUDA_DRIVER), the skip
 * message, and `gpuTest`. Without a device each file prints
 * "GPU suite skipped: <reason>" and skips, unless MTC_REQUIRE_GPU=1: then a
 * test fails saying why. (`npm test` shows a wholly skipped run as one line:
 * scripts/test.sh.)
 *
 * @module
 */

import { cudaDeviceCount, hasKernels, libraryVersion } from "../../ts/mod.ts";
import { env, note, test } from "../ts/harness.ts";
import { gpuSkipReason } from "./device_check.ts";
import type { FakeDriver } from "../ts/fake_driver.ts";

function skipReason(): string | undefined {
  const why = gpuSkipReason();
  if (why !== undefined) return why;
  const driver = env("MTC_CUDA_DRIVER") ? `emulated driver ${env("MTC_CUDA_DRIVER")}` : "CUDA driver";
  note(`GPU suite: ${cudaDeviceCount()} device(s), ${driver}, libmtc ${libraryVersion()}, kernels: ${hasKernels() ? "yes" : "no"}`);
  return undefined;
}

/** Why the GPU suite is skipped, or undefined when it runs. */
export const reason: string | undefined = skipReason();

if (reason !== undefined) {
  if (env("MTC_REQUIRE_GPU") === "1") {
    test("GPU suite: a CUDA device is required (MTC_REQUIRE_GPU=1)", () => {
      throw new Error(`GPU suite cannot run: ${reason}`);
    });
  } else {
    note(`GPU suite skipped: ${reason}`);
  }
}

/**
 * The emulated driver's test hooks where the suite runs on it (tests that
 * use them make a race certain there), else null: a real driver. Loaded
 * only when MTC_CUDA_DRIVER names a driver, so a CUDA host prints nothing
 * about emulated-driver tests.
 */
const hooks = env("MTC_CUDA_DRIVER") ? await import("../ts/fake_driver.ts") : null;
export const fake: FakeDriver | null = hooks?.fakeDriver() ?? null;

/** Runs `fn` with every copy of the emulated driver taking `us` µs; `fn` alone on a real driver. */
export function withCopyDelay<T>(us: number, fn: () => T): Promise<T> | T {
  return hooks !== null && fake !== null ? hooks.withCopyDelay(us, fn) : fn();
}

/** The device most tests use. */
export const DEVICE = "cuda:0";

/** Bun's limit for one GPU test: 120 s, or MTC_GPU_TEST_TIMEOUT_MS (the sanitizer mode raises it). */
const TIMEOUT_MS = Number(env("MTC_GPU_TEST_TIMEOUT_MS")) || 120_000;

/** What a GPU test needs beyond one CUDA device. */
export interface GpuNeeds {
  /** Devices (default 1). */
  gpus?: number;
  /** libmtc's own kernels (mtc_has_kernels()). */
  kernels?: boolean;
  /**
   * A real driver: on the emulated one the test is skipped, and this says
   * what covers it there.
   */
  realDriver?: string;
}

/** Why a test that needs `needs` cannot run here, or undefined when it can. */
function unmet(needs: GpuNeeds): string | undefined {
  if (reason !== undefined) return reason;
  const gpus = needs.gpus ?? 1;
  if (cudaDeviceCount() < gpus) return `needs ${gpus} GPUs; this host has ${cudaDeviceCount()}`;
  if (needs.kernels && !hasKernels()) return "needs libmtc's kernels: mtc_has_kernels() is 0";
  if (needs.realDriver !== undefined && fake !== null) return `needs a real driver; ${needs.realDriver}`;
  return undefined;
}

/**
 * A GPU test: skipped, and reported as skipped with the reason printed,
 * where no device exists or what it `needs` is not there.
 */
export function gpuTest(name: string, fn: () => void | Promise<void>, needs: GpuNeeds = {}): void {
  const why = unmet(needs);
  if (why !== undefined && why !== reason) note(`gpu: ${name}: skipped (${why})`);
  test(`gpu: ${name}`, fn, { skip: why, timeout: TIMEOUT_MS });
}
