/**
 * Copy options: accvlab's names in camelCase, their defaults, and their
 * encoding into the C `mtc_options` struct.
 *
 * @module
 */

import { checkOptionNames, invalidArgument } from "../base/errors.ts";
import { inDenoWorker } from "../base/runtime.ts";

/**
 * Options of {@link startCopy}. Every field is optional; the defaults are
 * accvlab.multi_tensor_copier's where it has the option.
 *
 * @example
 * ```ts
 * startCopy(batch, "cuda:0", { packThresholdBytes: 64 << 10, useBackgroundThread: false });
 * ```
 */
export interface CopyOptions {
  /** Stage host leaves through pinned memory so every DMA reads pinned memory. Default true. */
  usePinnedStaging?: boolean;
  /** Pack small contiguous host leaves into shared chunks, one DMA per chunk. Default true. */
  packCpuTensors?: boolean;
  /**
   * Each packed leaf starts at a multiple of roundUp(max(this, element size), element size),
   * as accvlab does (6 gives 6 for 2-byte elements, 8 for 4-byte ones); 1..4096. Default 16.
   */
  minPackedAlignmentBytes?: number;
  /** Most bytes in one packed chunk, 1 byte .. 1 TiB. Default 32 MiB. */
  maxPackedChunkBytes?: number;
  /**
   * Stage and submit on the library's background thread, so startCopy returns at once.
   * Default true; false inside a Deno worker, whose memory can be freed (terminate(),
   * close()) with no event first: there startCopy has read every host leaf when it returns.
   */
  useBackgroundThread?: boolean;
  /** Host leaves of at most this many bytes are packed. Default 256 KiB. */
  packThresholdBytes?: number;
  /** Most threads of the shared staging pool this copy uses; 0 = all. Default 0. */
  stagingThreads?: number;
  /** Large host leaves are staged in pieces of this many bytes (>= 4096), pipelined with their DMA. Default 8 MiB. */
  stagingPieceBytes?: number;
  /**
   * Refuse, with an MtcError naming the path, values that look like tensors
   * but would pass through uncopied while the result types say DeviceTensor:
   * an object the walk does not enter (a class instance, a Set, ...) that
   * holds a typed array, Tensor or DeviceTensor (searched 4 levels deep); a
   * plain object with a Tensor's fields, `data`, `shape` and `dtype` (what
   * structuredClone or a Worker's postMessage makes of a Tensor); a
   * non-empty array of numbers. TypeScript only (no C field). Default false.
   */
  strict?: boolean;
  /**
   * Copies to "cpu" only: give each host leaf back as a fresh copy (a new
   * typed array of its kind, or a Tensor over one), made on the calling
   * thread in startCopy, instead of the input itself. TypeScript only.
   * Default false: host leaves bound for the host are returned as they are.
   */
  copyHostLeaves?: boolean;
}

/**
 * The defaults, as a frozen object.
 *
 * @example
 * ```ts
 * startCopy(batch, "cuda:0", { maxPackedChunkBytes: DEFAULT_OPTIONS.maxPackedChunkBytes * 2 });
 * ```
 */
export const DEFAULT_OPTIONS: Readonly<Required<CopyOptions>> = Object.freeze({
  usePinnedStaging: true,
  packCpuTensors: true,
  minPackedAlignmentBytes: 16,
  maxPackedChunkBytes: 32 * 1024 * 1024,
  useBackgroundThread: !inDenoWorker,
  packThresholdBytes: 256 * 1024,
  stagingThreads: 0,
  stagingPieceBytes: 8 * 1024 * 1024,
  strict: false,
  copyHostLeaves: false,
});

/** sizeof(mtc_options). */
export const OPTIONS_SIZE = 56;

const BOOLEAN_KEYS = ["usePinnedStaging", "packCpuTensors", "useBackgroundThread", "strict", "copyHostLeaves"] as const;
const NUMBER_KEYS = [
  "minPackedAlignmentBytes",
  "maxPackedChunkBytes",
  "packThresholdBytes",
  "stagingThreads",
  "stagingPieceBytes",
] as const;
/** The names of {@link CopyOptions}. */
export const COPY_OPTION_NAMES: readonly string[] = [...BOOLEAN_KEYS, ...NUMBER_KEYS];

const TIB = 2 ** 40;

function checkInteger(key: string, value: number, min: number, max: number, rule?: string): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw invalidArgument(`option ${key} = ${String(value)} is out of range: ${rule ?? `an integer in ${min}..${max}`}`);
  }
}

/**
 * Fills in defaults and checks every option: unknown names, wrong types and
 * values outside the ranges mtc.h documents throw MtcError
 * (MTC_ERR_INVALID_ARGUMENT) naming the option. (libmtc checks the ranges
 * again at mtc_plan_create; its errors are passed on as they are.)
 */
export function resolveOptions(options: CopyOptions | undefined): Required<CopyOptions> {
  if (options === undefined) return DEFAULT_OPTIONS;
  checkOptionNames(options, COPY_OPTION_NAMES);
  const resolved = { ...DEFAULT_OPTIONS } as Required<CopyOptions>;
  for (const key of BOOLEAN_KEYS) {
    const value = options[key];
    if (value === undefined) continue;
    if (typeof value !== "boolean") throw invalidArgument(`option ${key} must be a boolean, got ${typeof value}`);
    resolved[key] = value;
  }
  for (const key of NUMBER_KEYS) {
    const value = options[key];
    if (value === undefined) continue;
    if (typeof value !== "number") throw invalidArgument(`option ${key} must be a number, got ${typeof value}`);
    resolved[key] = value;
  }
  const a = resolved.minPackedAlignmentBytes;
  checkInteger("minPackedAlignmentBytes", a, 1, 4096, "an integer in 1..4096");
  checkInteger("maxPackedChunkBytes", resolved.maxPackedChunkBytes, 1, TIB, "1 byte .. 1 TiB");
  checkInteger("packThresholdBytes", resolved.packThresholdBytes, 0, Number.MAX_SAFE_INTEGER);
  checkInteger("stagingThreads", resolved.stagingThreads, 0, 0xffffffff);
  checkInteger("stagingPieceBytes", resolved.stagingPieceBytes, 4096, Number.MAX_SAFE_INTEGER, "an integer >= 4096");
  return resolved;
}

function setU64(view: DataView, offset: number, value: number): void {
  view.setUint32(offset, value >>> 0, true);
  view.setUint32(offset + 4, Math.floor(value / 2 ** 32), true);
}

/** Writes resolved options into an mtc_options struct (little-endian; layout fixed by mtc.h). */
export function encodeOptions(o: Required<CopyOptions>, into: DataView): void {
  into.setUint32(0, OPTIONS_SIZE, true); // struct_size
  into.setUint32(4, o.usePinnedStaging ? 1 : 0, true);
  into.setUint32(8, o.packCpuTensors ? 1 : 0, true);
  into.setUint32(12, o.useBackgroundThread ? 1 : 0, true);
  setU64(into, 16, o.minPackedAlignmentBytes);
  setU64(into, 24, o.maxPackedChunkBytes);
  setU64(into, 32, o.packThresholdBytes);
  into.setUint32(40, o.stagingThreads, true);
  into.setUint32(44, 0, true); // reserved0
  setU64(into, 48, o.stagingPieceBytes);
}
