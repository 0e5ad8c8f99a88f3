/**
 * The emulated CUDA driver (tests/fake_cuda, libfakecuda.so) as tests see
 * it: whether it is in use (MTC_CUDA_DRIVER), and its test hooks, bound from
 * the same file libmtc loaded (dlopen of the same path gives the same copy).
 *
 * @module
 */

import { currentBackend } from "../../ts/ffi/library.ts";
import { env, note } from "./harness.ts";

/** The driver libmtc uses instead of libcuda.so.1, when set. */
export const driverPath: string | undefined = env("MTC_CUDA_DRIVER") || undefined;

/** Why the emulated-driver tests are skipped, or undefined when they run. */
export const skipWithoutDriver: string | undefined = driverPath === undefined
  ? "MTC_CUDA_DRIVER is not set (`npm run test:one -- FILE [bun|deno]` points it at zig-out/lib/libfakecuda.so)"
  : undefined;

if (skipWithoutDriver !== undefined) note(`emulated-driver tests skipped: ${skipWithoutDriver}`);

/** The fake driver's test hooks. */
export interface FakeDriver {
  setCopyDelayUs(us: number): void;
  copyCount(): number;
  liveDeviceAllocations(): number;
  /** The last launch of a PTX module's kernel (fake_cuda_last_launch), or null before any. */
  lastLaunch(): FakeLaunch | null;
  /** Turns the race check on pinned memory on or off (fake_cuda_check_races). */
  checkRaces(on: boolean): void;
  /** Races the check has reported in this process (fake_cuda_race_count). */
  raceCount(): number;
}

/** What the emulated driver recorded of a launch. */
export interface FakeLaunch {
  grid: number[];
  block: number[];
  sharedBytes: number;
  paramCount: number;
  /** Each parameter's bytes as the kernel's .entry declares its size, one after the other. */
  params: Uint8Array;
  /** The CUstream it was queued on. */
  stream: number;
}

let hooks: FakeDriver | null | undefined;

/** The hooks, or null when MTC_CUDA_DRIVER is unset or is not the fake driver. */
export function fakeDriver(): FakeDriver | null {
  if (hooks !== undefined) return hooks;
  hooks = null;
  if (driverPath === undefined) return hooks;
  try {
    const { symbols } = currentBackend().open(driverPath, {
      fake_cuda_set_copy_delay_us: { args: ["u64" /* unsigned long long us */], result: "void" },
      fake_cuda_copy_count: { args: [], result: "u64" /* unsigned long long */ },
      fake_cuda_live_device_allocations: { args: [], result: "i32" /* int */ },
      fake_cuda_last_launch: {
        args: ["buffer" /* unsigned int *dims */, "buffer" /* unsigned char *params */, "u32" /* unsigned int capacity */],
        result: "i32", /* int */
      },
      fake_cuda_last_launch_stream: { args: [], result: "u64" /* unsigned long long */ },
      fake_cuda_check_races: { args: ["i32" /* int on */], result: "void" },
      fake_cuda_race_count: { args: [], result: "u64" /* unsigned long long */ },
    });
    const call = symbols as unknown as Record<string, (...args: unknown[]) => number>;
    hooks = {
      setCopyDelayUs: (us) => void call.fake_cuda_set_copy_delay_us!(us),
      copyCount: () => call.fake_cuda_copy_count!(),
      liveDeviceAllocations: () => call.fake_cuda_live_device_allocations!(),
      lastLaunch: () => {
        const dims = new Uint32Array(8);
        const params = new Uint8Array(4096);
        const bytes = call.fake_cuda_last_launch!(dims, params, params.length);
        if (bytes < 0) return null;
        return {
          grid: [dims[0]!, dims[1]!, dims[2]!],
          block: [dims[3]!, dims[4]!, dims[5]!],
          sharedBytes: dims[6]!,
          paramCount: dims[7]!,
          params: params.slice(0, bytes),
          stream: call.fake_cuda_last_launch_stream!(),
        };
      },
      checkRaces: (on) => void call.fake_cuda_check_races!(on ? 1 : 0),
      raceCount: () => Number(call.fake_cuda_race_count!()),
    };
  } catch {
    hooks = null; // a real driver: no hooks
  }
  return hooks;
}

/** Runs `fn` with every copy taking `us` µs, then restores FAKE_CUDA_COPY_DELAY_US. */
export async function withCopyDelay<T>(us: number, fn: () => Promise<T> | T): Promise<T> {
  const fake = fakeDriver();
  if (fake === null) throw new Error("needs the emulated driver's hooks");
  fake.setCopyDelayUs(us);
  try {
    return await fn();
  } finally {
    fake.setCopyDelayUs(Number(env("FAKE_CUDA_COPY_DELAY_US") ?? 0) || 0);
  }
}

/** True where {@link collectGarbage} can force a collection. */
export function canCollectGarbage(): boolean {
  const g = globalThis as unknown as { Bun?: unknown; gc?: unknown };
  return g.Bun !== undefined || typeof g.gc === "function";
}

/** Collects garbage where the runtime lets us (Bun.gc, or gc() under --expose-gc); false otherwise. */
export function collectGarbage(): boolean {
  const g = globalThis as unknown as { Bun?: { gc(full: boolean): void }; gc?: () => void };
  if (g.Bun !== undefined) {
    g.Bun.gc(true);
    return true;
  }
  if (typeof g.gc === "function") {
    g.gc();
    return true;
  }
  return false;
}

/** Waits one macrotask. */
export function tick(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
