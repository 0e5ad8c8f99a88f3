/**
 * Pinned host tensors: host memory that the GPU reads and writes by DMA
 * where it lies. A copy to a device reads such a leaf in place (no staging
 * copy); a copyInto from a device writes into it in place.
 *
 * @module
 */

import { DTYPE_SIZE, type DType, isDType, type StorageFor, viewStorage } from "./dtype.ts";
import { checkedShape, elementCount, showShape, tooLarge } from "./shape.ts";
import { type Tensor, trustedTensor } from "./tensor.ts";
import { pinnedBuffer } from "./host_output.ts";
import { CURRENT_CUDA, type Device, parseDevice } from "../gpu/device.ts";
import { cudaOrdinal } from "../gpu/stream.ts";
import { checkOptionNames, invalidArgument, MtcError, showValue, Status, statusName } from "../base/errors.ts";
import { library, requireSymbol } from "../ffi/library.ts";

/** Options of {@link pinnedTensor}, {@link pinnedArray} and `Arena.create`. */
export interface PinnedOptions {
  /** The CUDA device whose context allocates the memory ("cuda" or 0 by default); every device can use it. */
  device?: Device | number;
}

const PINNED_OPTION_NAMES: readonly string[] = ["device"];

/**
 * @internal The options of a pinned allocation, read once: an unknown name
 * (a misspelt `device`) is an MtcError, as startCopy's are.
 */
export function readPinnedOptions(call: string, options: PinnedOptions | undefined): PinnedOptions | undefined {
  checkOptionNames(options, PINNED_OPTION_NAMES, `${call}: `);
  return options === undefined ? undefined : { device: options.device };
}

const outWords = new Uint32Array(2);
const info = new DataView(new ArrayBuffer(32));
const infoBytes = new Uint8Array(info.buffer);

/**
 * The ordinal of the device whose context allocates the memory. With no
 * driver, or no device, "cuda" names none: 0 then, and C gives pageable
 * memory in place of pinned (mtc/pinned.h), so that code written for both
 * kinds of machine runs on either.
 */
function allocatingOrdinal(device: Device | number, call: string): number {
  try {
    return cudaOrdinal(device, call);
  } catch (e) {
    const none = e instanceof MtcError && (e.status === Status.MTC_ERR_NO_DRIVER || e.status === Status.MTC_ERR_NO_DEVICE);
    if (none && typeof device === "string" && parseDevice(device) === CURRENT_CUDA) return 0;
    throw e;
  }
}

/** @internal A new pinned block of `bytes` (options read by readPinnedOptions): its pointer (one C reference, the caller's) and address. */
export function allocatePinnedBlock(call: string, bytes: number, options: PinnedOptions | undefined): { block: number; address: number } {
  const device = options?.device ?? "cuda";
  const ordinal = allocatingOrdinal(device, call);
  const alloc = requireSymbol("mtc_host_block_alloc", call);
  const sym = library().symbols;
  const status = alloc(ordinal, bytes, outWords);
  if (status !== Status.MTC_OK) throw new MtcError(status, `${call}: ${sym.mtc_last_error() || statusName(status)}`);
  const block = outWords[0]! + outWords[1]! * 4294967296;
  info.setUint32(0, 32, true);
  const got = sym.mtc_block_get_info(block, infoBytes);
  if (got !== Status.MTC_OK) {
    sym.mtc_block_release(block);
    throw new MtcError(got, `${call}: ${sym.mtc_last_error()}`);
  }
  return { block, address: Number(info.getBigUint64(8, true)) };
}

/**
 * An ArrayBuffer over `bytes` of new pinned memory; the buffer holds the
 * block. An empty tensor needs no memory: a plain empty buffer (a copy has
 * nothing to read from it).
 */
function pinnedStorage(call: string, bytes: number, options: PinnedOptions | undefined): ArrayBuffer {
  if (bytes === 0) return new ArrayBuffer(0);
  const { block, address } = allocatePinnedBlock(call, bytes, options);
  try {
    return pinnedBuffer(library(), block, address, bytes);
  } finally {
    library().symbols.mtc_block_release(block); // the buffer holds its own reference
  }
}

/** @internal Checks a dtype and shape; returns the frozen shape and its bytes. */
export function checkedLayout(call: string, dtype: DType, shape: readonly number[]): { shape: readonly number[]; elements: number; bytes: number } {
  if (!isDType(dtype)) throw invalidArgument(`${call}: unknown dtype ${showValue(dtype)}`);
  const checked = checkedShape(shape);
  if (checked === undefined) throw invalidArgument(`${call}: the shape must be an array of integers >= 0, got ${Array.isArray(shape) ? showShape(shape) : showValue(shape)}`);
  const elements = elementCount(checked);
  const large = tooLarge(checked, dtype, elements, DTYPE_SIZE[dtype]);
  if (large !== null) throw invalidArgument(`${call}: ${large}`);
  return { shape: checked, elements, bytes: elements * DTYPE_SIZE[dtype] };
}

/**
 * A new host Tensor of `dtype` and `shape` in pinned (page-locked) memory of
 * the library's, contents undefined. A copy to a GPU reads it by DMA where
 * it lies, with no staging copy; `copyInto` from a GPU writes it in place.
 * Such copies read (or write) it after `startCopy` returns, until the copy
 * is over: write it again only then (after `await`, or `ready()` is true).
 *
 * Give it back with `dispose()` / `using` (or `disposeAll`); the garbage
 * collector is the backstop. Its memory counts against the limit on pinned
 * memory held by tensors and arenas ({@link setPinnedHeldLimit}), not the
 * staging limit. Sizes are rounded up to the pinned pool's classes (powers
 * of two from 64 KiB): for many small tensors, use an `Arena`.
 *
 * Without a GPU (no CUDA driver, or one that sees no device) it is pageable
 * host memory of the library's with the same API, so that the same code
 * runs there: copies to "cpu" work, a copy to a GPU fails as any does.
 *
 * @example
 * ```ts
 * using boxes = pinnedTensor("float32", [100, 4]);
 * boxes.data.set(myBoxes);
 * const onGpu = await startCopy({ boxes }, "cuda:0"); // one DMA, no staging
 * ```
 */
export function pinnedTensor<D extends DType>(dtype: D, shape: readonly number[], options?: PinnedOptions): Tensor<D, StorageFor<D>> {
  const read = readPinnedOptions("pinnedTensor", options);
  const layout = checkedLayout("pinnedTensor", dtype, shape);
  const buffer = pinnedStorage("pinnedTensor", layout.bytes, read);
  return trustedTensor(viewStorage(dtype, buffer, 0, layout.elements)!, layout.shape, dtype);
}

/**
 * A new typed array of `length` elements of `dtype` (its natural array
 * kind) in pinned memory: {@link pinnedTensor} as a bare array. Give it back
 * with `releaseHostOutput` or `disposeAll` (a typed array has no dispose).
 */
export function pinnedArray<D extends DType>(dtype: D, length: number, options?: PinnedOptions): StorageFor<D> {
  const read = readPinnedOptions("pinnedArray", options);
  if (!Number.isSafeInteger(length) || length < 0) throw invalidArgument(`pinnedArray: the length must be an integer >= 0, got ${showValue(length)}`);
  const layout = checkedLayout("pinnedArray", dtype, [length]);
  const buffer = pinnedStorage("pinnedArray", layout.bytes, read);
  return viewStorage(dtype, buffer, 0, layout.elements)! as StorageFor<D>;
}


/**
 * Sets the limit on pinned memory held by pinned tensors and arenas
 * (default: a quarter of the physical memory, at most 8 GiB; or the
 * environment variable MTC_PINNED_HELD_LIMIT). Past it, allocating one
 * throws MtcError (MTC_ERR_OUT_OF_MEMORY) naming the limit. Tensors and
 * arenas held already stay. `poolStats()` shows what is held
 * (`pinnedHeldBytes`) and the limit. `bytes`: 1 MiB to 1 PiB (an integer),
 * else MtcError (MTC_ERR_INVALID_ARGUMENT).
 */
export function setPinnedHeldLimit(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 2 ** 20 || bytes > 2 ** 50) {
    throw invalidArgument(`setPinnedHeldLimit: bytes must be an integer from 1 MiB to 1 PiB (${2 ** 20} to ${2 ** 50}), got ${showValue(bytes)}`);
  }
  const set = requireSymbol("mtc_set_pinned_held_limit", "setPinnedHeldLimit");
  const status = set(bytes);
  if (status !== Status.MTC_OK) throw new MtcError(status, `setPinnedHeldLimit: ${library().symbols.mtc_last_error() || statusName(status)}`);
}
