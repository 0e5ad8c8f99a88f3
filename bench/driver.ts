/**
 * The CUDA driver, bound directly (not through libmtc), for the two yardsticks
 * every scenario is measured against in the same process:
 *  - the naive baseline: one allocation and one synchronous copy per leaf;
 *  - the floor: one copy of the scenario's total bytes from pinned memory, then a sync
 *    (between two GPUs: one peer copy of the same bytes, then a sync).
 *
 * @module
 */

import { currentBackend } from "../ts/ffi/library.ts";
import type { SymbolSpec } from "../ts/ffi/symbols.ts";
import { getEnv } from "../ts/base/runtime.ts";

const table = {
  cuInit: { args: ["u32" /* unsigned int flags */], result: "i32" },
  cuDeviceGet: { args: ["buffer" /* CUdevice *device */, "i32" /* int ordinal */], result: "i32" },
  cuDevicePrimaryCtxRetain: { args: ["buffer" /* CUcontext *pctx */, "i32" /* CUdevice dev */], result: "i32" },
  cuCtxSetCurrent: { args: ["ptr" /* CUcontext ctx */], result: "i32" },
  cuStreamCreate: { args: ["buffer" /* CUstream *phStream */, "u32" /* unsigned int flags */], result: "i32" },
  cuStreamSynchronize: { args: ["ptr" /* CUstream hStream */], result: "i32" },
  cuMemAlloc_v2: { args: ["buffer" /* CUdeviceptr *dptr */, "u64" /* size_t bytesize */], result: "i32" },
  cuMemFree_v2: { args: ["u64" /* CUdeviceptr dptr */], result: "i32" },
  cuMemHostAlloc: { args: ["buffer" /* void **pp */, "u64" /* size_t bytesize */, "u32" /* unsigned int flags */], result: "i32" },
  cuMemFreeHost: { args: ["ptr" /* void *p */], result: "i32" },
  cuMemcpyHtoDAsync_v2: {
    args: ["u64" /* CUdeviceptr dst */, "ptr" /* const void *src */, "u64" /* size_t bytes */, "ptr" /* CUstream stream */],
    result: "i32",
  },
  cuMemcpyDtoHAsync_v2: {
    args: ["ptr" /* void *dst */, "u64" /* CUdeviceptr src */, "u64" /* size_t bytes */, "ptr" /* CUstream stream */],
    result: "i32",
  },
  cuMemcpyPeerAsync: {
    args: [
      "u64", /* CUdeviceptr dstDevice */
      "ptr", /* CUcontext dstContext */
      "u64", /* CUdeviceptr srcDevice */
      "ptr", /* CUcontext srcContext */
      "u64", /* size_t ByteCount */
      "ptr", /* CUstream hStream */
    ],
    result: "i32",
  },
  cuDeviceCanAccessPeer: { args: ["buffer" /* int *canAccessPeer */, "i32" /* CUdevice dev */, "i32" /* CUdevice peerDev */], result: "i32" },
  cuCtxEnablePeerAccess: { args: ["ptr" /* CUcontext peerContext */, "u32" /* unsigned int Flags */], result: "i32" },
} as const satisfies Record<string, SymbolSpec>;

type Fn = (...args: unknown[]) => number;

/** The raw driver calls the yardsticks use, on one device. */
export class RawDriver {
  readonly #fn: Record<keyof typeof table, Fn>;
  readonly #stream: number;
  readonly #ordinal: number;
  /** The device's primary context (CUcontext), current on this thread after the constructor and use(). */
  readonly context: number;
  readonly #out = new Uint32Array(2);
  /** True for the emulated driver (tests/fake_cuda), known by its test hooks: its copies are host memcpy. */
  readonly emulated: boolean;

  constructor(device: number) {
    const path = getEnv("MTC_CUDA_DRIVER") || "libcuda.so.1";
    this.#fn = currentBackend().open(path, table).symbols as unknown as Record<keyof typeof table, Fn>;
    this.emulated = hasTestHooks(path);
    this.#check(this.#fn.cuInit(0), "cuInit");
    this.#check(this.#fn.cuDeviceGet(this.#out, device), "cuDeviceGet");
    const ordinal = this.#out[0]!;
    this.#ordinal = ordinal;
    this.#check(this.#fn.cuDevicePrimaryCtxRetain(this.#out, ordinal), "cuDevicePrimaryCtxRetain");
    this.context = this.#word();
    this.#check(this.#fn.cuCtxSetCurrent(this.context), "cuCtxSetCurrent");
    this.#check(this.#fn.cuStreamCreate(this.#out, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
    this.#stream = this.#word();
  }

  /** Device memory (cuMemAlloc). */
  alloc(bytes: number): number {
    this.#check(this.#fn.cuMemAlloc_v2(this.#out, Math.max(bytes, 1)), "cuMemAlloc_v2");
    return this.#word();
  }

  free(address: number): void {
    this.#check(this.#fn.cuMemFree_v2(address), "cuMemFree_v2");
  }

  /** Pinned host memory (cuMemHostAlloc). */
  allocPinned(bytes: number): number {
    this.#check(this.#fn.cuMemHostAlloc(this.#out, Math.max(bytes, 1), 1 /* PORTABLE */), "cuMemHostAlloc");
    return this.#word();
  }

  freePinned(address: number): void {
    this.#check(this.#fn.cuMemFreeHost(address), "cuMemFreeHost");
  }

  /** Host → device, then wait for it: a synchronous copy. */
  copyToDevice(dst: number, srcHost: number, bytes: number): void {
    this.#check(this.#fn.cuMemcpyHtoDAsync_v2(dst, srcHost, bytes, this.#stream), "cuMemcpyHtoDAsync_v2");
    this.#check(this.#fn.cuStreamSynchronize(this.#stream), "cuStreamSynchronize");
  }

  /** Device → host, then wait for it: a synchronous copy. */
  copyToHost(dstHost: number, src: number, bytes: number): void {
    this.#check(this.#fn.cuMemcpyDtoHAsync_v2(dstHost, src, bytes, this.#stream), "cuMemcpyDtoHAsync_v2");
    this.#check(this.#fn.cuStreamSynchronize(this.#stream), "cuStreamSynchronize");
  }

  /** Makes this device's context current on the calling thread (the others' calls need theirs). */
  use(): void {
    this.#check(this.#fn.cuCtxSetCurrent(this.context), "cuCtxSetCurrent");
  }

  /**
   * Lets this device's context reach `owner`'s memory directly, as libmtc
   * does for a pair (an "already enabled" answer is fine); false when the
   * pair cannot, and peer copies then go through the host. Makes this
   * device's context current.
   */
  enablePeer(owner: RawDriver): boolean {
    const can = new Int32Array(1);
    this.#check(this.#fn.cuDeviceCanAccessPeer(can, this.#ordinal, owner.#ordinal), "cuDeviceCanAccessPeer");
    if (can[0] === 0) return false;
    this.use();
    const r = this.#fn.cuCtxEnablePeerAccess(owner.context, 0);
    if (r !== 0 && r !== 704 /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */) this.#check(r, "cuCtxEnablePeerAccess");
    return true;
  }

  /** Device → device (`src` of `source`'s, `dst` of this device's) on this device's stream, then wait: a synchronous peer copy. This device's context must be current. */
  copyFromPeer(dst: number, source: RawDriver, src: number, bytes: number): void {
    this.#check(this.#fn.cuMemcpyPeerAsync(dst, this.context, src, source.context, bytes, this.#stream), "cuMemcpyPeerAsync");
    this.#check(this.#fn.cuStreamSynchronize(this.#stream), "cuStreamSynchronize");
  }

  #word(): number {
    return this.#out[0]! + this.#out[1]! * 4294967296;
  }

  #check(result: number, call: string): void {
    if (result !== 0) throw new Error(`${call} failed with CUDA error ${result}`);
  }
}

/** Whether the driver at `path` exports the emulated driver's test hooks. */
function hasTestHooks(path: string): boolean {
  try {
    currentBackend().open(path, { fake_cuda_copy_count: { args: [], result: "u64" } });
    return true;
  } catch {
    return false;
  }
}
