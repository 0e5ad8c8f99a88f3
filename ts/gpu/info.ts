/**
 * Library-wide queries: CUDA devices, the loaded library's version, and the
 * pool counters.
 *
 * @module
 */

import { CURRENT_CUDA, DEVICE_CPU, type Device, parseDevice } from "./device.ts";
import { checkOptionNames, invalidArgument, MtcError, showValue, Status, statusName } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";

/**
 * The number of CUDA devices; 0 when there is no CUDA driver
 * ({@link cudaUnavailableReason} says why).
 *
 * @example
 * ```ts
 * const device = cudaDeviceCount() > 0 ? "cuda:0" : "cpu";
 * ```
 */
export function cudaDeviceCount(): number {
  const sym = library().symbols;
  const out = new Int32Array(1);
  const status = sym.mtc_cuda_device_count(out);
  if (status === Status.MTC_ERR_NO_DRIVER) return 0;
  if (status !== Status.MTC_OK) throw new MtcError(status, `cudaDeviceCount: ${sym.mtc_last_error() || statusName(status)}`);
  return out[0]!;
}

/**
 * Why no CUDA device can be used here, in the driver's words: the CUDA
 * driver could not be loaded (`could not load the CUDA driver libcuda.so.1:
 * ...`), did not initialise (`cuInit returned CUDA_ERROR_NO_DEVICE`), or
 * reports no device. `undefined` when {@link cudaDeviceCount} is above 0.
 *
 * @example
 * ```ts
 * const why = cudaUnavailableReason();
 * const device = why === undefined ? "cuda:0" : "cpu";
 * if (why !== undefined) console.log(`no CUDA device (${why}): copying to the host`);
 * ```
 */
export function cudaUnavailableReason(): string | undefined {
  const sym = library().symbols;
  const out = new Int32Array(1);
  const status = sym.mtc_cuda_device_count(out);
  if (status === Status.MTC_ERR_NO_DRIVER) return sym.mtc_last_error() || "the CUDA driver could not be used";
  if (status !== Status.MTC_OK) throw new MtcError(status, `cudaUnavailableReason: ${sym.mtc_last_error() || statusName(status)}`);
  return out[0]! > 0 ? undefined : "the CUDA driver reports no device";
}

/** What the CUDA driver says of one device ({@link cudaDeviceInfo}). */
export interface CudaDeviceInfo {
  /** The device's name, e.g. "NVIDIA H100 80GB HBM3". */
  name: string;
  /** Its memory in bytes. */
  totalMemoryBytes: number;
}

function check(call: string, status: number): void {
  if (status !== Status.MTC_OK) throw new MtcError(status, `${call}: ${library().symbols.mtc_last_error() || statusName(status)}`);
}

/**
 * @internal The name and memory of CUDA device `ordinal`, for the doctor
 * (`multi-tensor-copier doctor`).
 */
export function cudaDeviceInfo(ordinal: number): CudaDeviceInfo {
  const describe = requireSymbol("mtc_cuda_device_describe", "device descriptions");
  const name = new Uint8Array(256);
  const total = new BigUint64Array(1);
  check("cudaDeviceInfo", describe(ordinal, name, name.length, new Uint8Array(total.buffer)));
  const end = name.indexOf(0);
  return { name: new TextDecoder().decode(name.subarray(0, end < 0 ? name.length : end)), totalMemoryBytes: Number(total[0]) };
}

/** @internal Whether CUDA device `ordinal` may reach `peer`'s memory directly (false for itself). */
export function cudaPeerAccess(ordinal: number, peer: number): boolean {
  const can = new Int32Array(1);
  check("cudaPeerAccess", requireSymbol("mtc_cuda_can_access_peer", "peer access queries")(ordinal, peer, can));
  return can[0] !== 0;
}

/** @internal The CUDA driver libmtc loaded: its file and CUDA version ("13.0"), or undefined without one. */
export function cudaDriverInfo(): { file: string; version: string } | undefined {
  const sym = library().symbols;
  const out = new Int32Array(1);
  if (sym.mtc_cuda_driver_version === undefined || sym.mtc_cuda_driver_file === undefined) return undefined;
  if (sym.mtc_cuda_driver_version(out) !== Status.MTC_OK) return undefined;
  const v = out[0]!;
  return { file: sym.mtc_cuda_driver_file(), version: `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}` };
}

/**
 * The loaded libmtc's version string, e.g. "0.1.0".
 *
 * @example
 * ```ts
 * console.log(`libmtc ${libraryVersion()}`);
 * ```
 */
export function libraryVersion(): string {
  return library().versionString;
}

/** Library-wide counters (mtc_stats), for tests, benchmarks and leak checks. */
export interface PoolStats {
  /** Threads in the shared staging pool. */
  stagingThreads: number;
  /** Plans created and not yet released. */
  plansLive: number;
  /** Blocks not yet freed (host and device). */
  blocksLive: number;
  /** Bytes in live device blocks. */
  deviceBytesLive: number;
  /** Bytes in live host blocks. */
  hostBytesLive: number;
  /** Pinned bytes idle in the pool, kept for reuse. */
  pinnedBytesCached: number;
  /** Pinned bytes lent out: staging of copies in flight, and pinned host blocks. */
  pinnedBytesInUse: number;
  /** cuMemHostAlloc calls so far. */
  pinnedAllocations: number;
  /** Pinned pool hits so far. */
  pinnedReuses: number;
  /**
   * The limit on pinned staging lent out plus idle (see {@link setPinnedPoolLimit});
   * 0 from a libmtc older than the limit.
   */
  pinnedLimitBytes: number;
  /** Pinned staging lent to copies now (counted against the limit). */
  pinnedStagingBytes: number;
  /** Pinned host outputs (copies to "cpu") held now: not limited. */
  pinnedOutputBytes: number;
  /** The most pinned staging lent out plus idle at once since the limit was last set: never above it. */
  pinnedHighWaterBytes: number;
  /** Staging requests so far that found the pool at its limit and waited for buffers to come back. */
  pinnedLimitWaits: number;
  /** Pinned memory held by pinned tensors and arenas now (not limited by the pool's limit: by its own). */
  pinnedHeldBytes: number;
  /** The limit on pinned memory held by pinned tensors and arenas ({@link setPinnedHeldLimit}). */
  pinnedHeldLimitBytes: number;
}

const STATS_SIZE = 128; // sizeof(mtc_stats)

/**
 * The library's counters now.
 *
 * @example
 * ```ts
 * const before = poolStats().blocksLive;
 * // ... copy, use, dispose ...
 * console.assert(poolStats().blocksLive === before);
 * ```
 */
export function poolStats(): PoolStats {
  const sym = library().symbols;
  const bytes = new Uint8Array(STATS_SIZE);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, STATS_SIZE, true);
  const status = sym.mtc_get_stats(bytes); // an older libmtc fills its 80 bytes and leaves the rest 0
  if (status !== Status.MTC_OK) throw new MtcError(status, `poolStats: ${sym.mtc_last_error() || statusName(status)}`);
  const u64 = (offset: number) => view.getUint32(offset, true) + view.getUint32(offset + 4, true) * 4294967296;
  return {
    stagingThreads: view.getUint32(4, true),
    plansLive: u64(8),
    blocksLive: u64(16),
    deviceBytesLive: u64(24),
    hostBytesLive: u64(32),
    pinnedBytesCached: u64(40),
    pinnedBytesInUse: u64(48),
    pinnedAllocations: u64(56),
    pinnedReuses: u64(64),
    pinnedLimitBytes: u64(72),
    pinnedStagingBytes: u64(80),
    pinnedOutputBytes: u64(88),
    pinnedHighWaterBytes: u64(96),
    pinnedLimitWaits: u64(104),
    pinnedHeldBytes: u64(112),
    pinnedHeldLimitBytes: u64(120),
  };
}

/**
 * Sets the limit of the pinned (page-locked) memory the library holds for
 * staging: buffers lent to copies in flight plus idle ones kept for reuse.
 * At the limit, staging waits for copies in flight to give buffers back
 * (ending copies that are over even if nobody awaits them), and a leaf
 * larger than the limit goes through it in pieces. Pinned host outputs of
 * copies to "cpu" are not limited. Default: a quarter of the physical
 * memory, at most 2 GiB; the environment variable MTC_PINNED_LIMIT (read
 * by libmtc at first use, e.g. `512m`) replaces the default. `bytes`:
 * 1 MiB to 1 PiB. Applies to copies started from now on, frees idle
 * buffers above it, and restarts `poolStats().pinnedHighWaterBytes`.
 *
 * @example
 * ```ts
 * setPinnedPoolLimit(256 * 2 ** 20); // 256 MiB
 * ```
 */
export function setPinnedPoolLimit(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 2 ** 20 || bytes > 2 ** 50) {
    throw invalidArgument(`setPinnedPoolLimit: bytes must be an integer from 1 MiB to 1 PiB (${2 ** 20} to ${2 ** 50}), got ${showValue(bytes)}`);
  }
  const setLimit = requireSymbol("mtc_set_pinned_limit", "pinned pool limits");
  const status = setLimit(bytes);
  const sym = library().symbols;
  if (status !== Status.MTC_OK) throw new MtcError(status, `setPinnedPoolLimit: ${sym.mtc_last_error() || statusName(status)}`);
}

const WARM_UP_OPTIONS: readonly string[] = ["pinnedBytes", "pinnedBufferBytes", "deviceBytes"];

/** What {@link warmUp} prepares. */
export interface WarmUpOptions {
  /** Pinned staging memory to keep ready, in bytes (default: three pieces, the ring one large leaf streams through). */
  pinnedBytes?: number;
  /** Size of each pinned buffer: the `stagingPieceBytes` of the copies to come (default 8 MiB). */
  pinnedBufferBytes?: number;
  /** Device memory to grow the device's pool by, allocated once and given back (default 0). */
  deviceBytes?: number;
}

/**
 * Pays a device's first-use costs before its first copy: its context, copy
 * stream, memory pool and kernels, and pinned staging buffers kept idle in the
 * pool (within its limit) for the copies to come. Without it the first large
 * copy allocates its pinned memory, which takes milliseconds (about 2.8 ms for
 * 4 MB on an H100 host).
 *
 * Throws MtcError (MTC_ERR_INVALID_ARGUMENT) for options that are not an
 * object, an unknown option name (as startCopy does), or a size that is not
 * a whole number of bytes.
 *
 * @example
 * ```ts
 * warmUp("cuda:0", { pinnedBytes: 3 * 8 << 20, deviceBytes: 256 << 20 });
 * const first = await startCopy(batch, "cuda:0"); // no pinned allocation on the way
 * ```
 */
export function warmUp(device: Device, options: WarmUpOptions = {}): void {
  const where = "warmUp";
  checkOptionNames(options, WARM_UP_OPTIONS, `${where}: `);
  let ordinal = parseDevice(device, `${where}: `);
  if (ordinal === DEVICE_CPU) throw invalidArgument(`${where}: "cpu" has nothing to warm up; name a CUDA device`);
  const sym = library().symbols;
  if (ordinal === CURRENT_CUDA) {
    const out = new Int32Array(1);
    const found = sym.mtc_cuda_current_device(out);
    if (found !== Status.MTC_OK) throw new MtcError(found, `${where}: ${sym.mtc_last_error() || statusName(found)}`);
    ordinal = out[0]!;
  }
  const count = (name: keyof WarmUpOptions, fallback: number): number => {
    const value = options[name] ?? fallback;
    if (!Number.isSafeInteger(value) || value < 0) {
      throw invalidArgument(`${where}: ${name} must be a whole number of bytes, got ${showValue(value)}`);
    }
    return value;
  };
  const buffer = count("pinnedBufferBytes", 8 << 20);
  const pinned = count("pinnedBytes", 3 * (buffer || 8 << 20));
  const deviceBytes = count("deviceBytes", 0);
  const warm = requireSymbol("mtc_warm_up", "warmUp");
  const status = warm(ordinal, pinned, buffer, deviceBytes);
  if (status !== Status.MTC_OK) throw new MtcError(status, `${where}: ${sym.mtc_last_error() || statusName(status)}`);
}

/**
 * Frees idle pinned staging memory held by the library's pool.
 *
 * @example
 * ```ts
 * trimPools();
 * ```
 */
export function trimPools(): void {
  library().symbols.mtc_trim_pools();
}

/**
 * True when the loaded libmtc carries its CUDA kernels (it was built with
 * nvcc): device-to-host copies of many leaves are then gathered on the GPU
 * into one DMA (`stats().deviceToHostPath === "gather-kernel"`). False for a
 * build without them, and for a libmtc too old to say.
 *
 * @example
 * ```ts
 * if (!hasKernels()) console.warn("libmtc was built without nvcc: slower device-to-host copies");
 * ```
 */
export function hasKernels(): boolean {
  const has = library().symbols.mtc_has_kernels;
  return has !== undefined && has() !== 0;
}
