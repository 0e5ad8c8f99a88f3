/**
 * Host outputs of copies to "cpu": typed arrays that view the pinned host
 * block the C library filled, with no copy out of it.
 *
 * One ArrayBuffer per block covers every leaf of the copy that landed in
 * it; each leaf's typed array is a view into that buffer. The buffer holds
 * one C reference to the block (a ref of this thread's owner, one per
 * block, not per leaf: ffi/owner.ts), dropped when the buffer is
 * garbage-collected (every view of it gone) or released early with
 * {@link releaseHostOutput}:
 * - Bun: the buffer is made by `toArrayBuffer` with `mtc_ref_release_callback`
 *   as its deallocator and the ref as context, so the runtime itself drops
 *   the reference when it frees the buffer;
 * - Deno (and Bun with a libmtc older than that callback): a
 *   FinalizationRegistry on the buffer drops it.
 *
 * @module
 */

import { DTYPE_SIZE, type DType, type TypedArray, viewStorage } from "./dtype.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import { blockRefReleaseCallback, releaseBlockRef, retainBlockRef } from "../ffi/owner.ts";
import { markReleased, setTensorDisposeHook, Tensor, trustedTensor } from "./tensor.ts";
import { bufferUnder, detach, isDetached } from "../base/views.ts";

/** The C reference an ArrayBuffer over a pinned block holds. */
interface PinnedRef {
  readonly block: number;
  /** The owner's ref for that reference. */
  readonly ref: number;
  /** True when the buffer's deallocator (Bun) drops the reference; false when the registry does. */
  readonly deallocates: boolean;
  /** False for an arena's buffer: only the arena releases it (reset, dispose). */
  readonly releasable: boolean;
}

const pinned = new WeakMap<ArrayBuffer, PinnedRef>();

/** Backstop where the runtime has no deallocator: drops the block when its buffer is collected. */
const registry = new FinalizationRegistry<number>(releaseBlockRef);

/**
 * An ArrayBuffer over `byteLength` bytes at `address` (the start of host
 * block `block`), holding one new C reference to the block, or `held`, a
 * ref this thread holds already (a moved result's).
 */
export function pinnedBuffer(lib: MtcLibrary, block: number, address: number, byteLength: number, releasable = true, held?: number): ArrayBuffer {
  const blockRef = held ?? retainBlockRef(block);
  let buffer: ArrayBuffer;
  let ref: PinnedRef;
  try {
    const deallocator = blockRefReleaseCallback(lib);
    if (deallocator !== undefined) {
      buffer = lib.backend.externalBuffer(address, byteLength, { address: deallocator, context: blockRef });
      ref = { block, ref: blockRef, deallocates: true, releasable };
    } else {
      buffer = lib.backend.externalBuffer(address, byteLength);
      ref = { block, ref: blockRef, deallocates: false, releasable };
      registry.register(buffer, blockRef, ref);
    }
  } catch (e) {
    releaseBlockRef(blockRef);
    throw e;
  }
  pinned.set(buffer, ref);
  return buffer;
}

/**
 * The leaf `byteOffset` bytes into `buffer`: `length` elements of `dtype`
 * (elements, not array values: a complex element is two),
 * as a typed array view (1-D, natural dtype) or a Tensor over one with
 * `shape` (frozen). Copies out only in the unexpected case of an offset
 * misaligned for the element type.
 */
export function hostLeafView(
  buffer: ArrayBuffer,
  byteOffset: number,
  dtype: DType,
  shape: readonly number[],
  length: number,
  natural: boolean,
): TypedArray | Tensor {
  let data = viewStorage(dtype, buffer, byteOffset, length);
  if (data === null) {
    // Misaligned: a JS-owned copy (the block is released with the buffer).
    data = viewStorage(dtype, new Uint8Array(buffer, byteOffset, length * DTYPE_SIZE[dtype]).slice().buffer, 0, length)!;
  }
  if (natural && shape.length === 1) return data;
  return trustedTensor(data, shape, dtype);
}

/**
 * True when `value` (a typed array, a Tensor or an ArrayBuffer) views
 * pinned host memory that a copy to "cpu" handed out and that was not
 * released yet.
 *
 * @example
 * ```ts
 * const back = await startCopy({ boxes: onGpu }, "cpu");
 * isPinnedHostOutput(back.boxes); // true
 * ```
 */
export function isPinnedHostOutput(value: unknown): boolean {
  const buffer = bufferOf(value);
  return buffer !== undefined && pinned.has(buffer) && !isDetached(buffer);
}

/**
/**
 * @internal For the buffer of a pinned host output: one new C reference to
 * its block (a ref: the caller releases it with releaseBlockRef), so that a copy
 * reading or writing its views keeps the block out of the pool until it is
 * over, even if the output is released meanwhile. 0 for any other buffer
 * (one lookup: this runs for every host leaf of a copy).
 */
export function retainPinnedBlock(buffer: ArrayBufferLike): number {
  const ref = pinned.get(buffer as ArrayBuffer);
  if (ref === undefined || isDetached(buffer as ArrayBuffer)) return 0;
  return retainBlockRef(ref.block);
}

/**
 * @internal The pinned block under `buffer`, and whether it may be released
 * by its user (an arena's is only the arena's); undefined for any other
 * buffer, or one released or detached.
 */
export function pinnedBlockOf(buffer: ArrayBufferLike): { block: number; releasable: boolean } | undefined {
  const ref = pinned.get(buffer as ArrayBuffer);
  if (ref === undefined || isDetached(buffer as ArrayBuffer)) return undefined;
  return ref;
}

/**
 * The pinned buffer that `value` (an ArrayBuffer, a view, a Tensor's data)
 * shows, found by the engine's own `buffer` (an own property cannot point
 * elsewhere), or undefined.
 */
function bufferOf(value: unknown): ArrayBuffer | undefined {
  if (value instanceof Tensor) value = value.data;
  const buffer = ArrayBuffer.isView(value) ? bufferUnder(value) : value;
  return pinned.has(buffer as ArrayBuffer) ? buffer as ArrayBuffer : undefined;
}

/**
 * @internal Releases the pinned block under one leaf or buffer; true when
 * it released one. `owner`: an arena releasing its own buffer (others are
 * left alone for its tensors).
 */
export function releasePinned(value: unknown, owner = false): boolean {
  const buffer = bufferOf(value);
  if (buffer === undefined) return false;
  const ref = pinned.get(buffer);
  if (ref === undefined || (!ref.releasable && !owner)) return false;
  pinned.delete(buffer);
  // Detached by someone else (transferred): its memory now lives with the
  // transferred buffer; leave the release to the garbage collector.
  if (isDetached(buffer)) return false;
  // Detaching empties every view of the buffer (length 0), so no array can
  // read the block once it is back in the pool. With a deallocator (Bun),
  // detaching runs it at once: that drops the reference. The engine's own
  // transfer: one the caller put on the buffer could leave its views.
  detach(buffer);
  // A copy of a view now says why it is empty (tensor.ts: releasedData, Tensor#disposed).
  markReleased(buffer, "pinned memory", "dispose(), releaseHostOutput, disposeAll, or its arena's reset() or dispose()");
  if (!ref.deallocates) {
    registry.unregister(ref);
    releaseBlockRef(ref.ref);
  }
  return true;
}

/**
 * Gives the pinned host memory under the outputs of a copy to "cpu" back to
 * the library now, instead of when the garbage collector frees them.
 * `value` is one output (typed array or Tensor) or any nesting of arrays,
 * plain objects and Maps holding them, as `startCopy(…, "cpu")` returned it.
 *
 * Outputs of one copy usually share one pinned block: releasing it empties
 * EVERY typed array that views it (they become detached, length 0; a Tensor
 * over one says `disposed`, and a copy of it is an MtcError), not only the
 * ones passed here. Copy out first (`array.slice()`) what you keep.
 * Arrays that are not pinned outputs (your own, or leaves reused as they
 * were) are left alone. Idempotent. Returns the number of blocks released.
 * `disposeAll` does this too, besides disposing DeviceTensors.
 *
 * Why release explicitly: the garbage collector does not see the pinned
 * bytes behind these small JavaScript objects, so in a loop it may keep
 * many blocks alive for a while.
 *
 * Do not transfer these buffers to workers (`postMessage(…, [buffer])`,
 * `structuredClone` with `transfer`): copy what a worker needs (`slice()`).
 * Under Deno the block is released when the original buffer object is
 * collected, whatever the transferred one still views.
 *
 * @example
 * ```ts
 * const back = await startCopy({ losses: onGpu }, "cpu");
 * const total = back.losses.reduce((a, b) => a + b, 0);
 * releaseHostOutput(back); // back.losses is now empty
 * ```
 */
export function releaseHostOutput(value: unknown): number {
  let released = 0;
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item !== "object" || item === null) continue;
    if (item instanceof Tensor || item instanceof ArrayBuffer || ArrayBuffer.isView(item)) {
      if (releasePinned(item)) released++;
      continue;
    }
    if (seen.has(item)) continue;
    seen.add(item);
    if (Array.isArray(item)) {
      for (const v of item) stack.push(v);
    } else if (item instanceof Map) {
      for (const v of item.values()) stack.push(v);
    } else {
      const proto = Object.getPrototypeOf(item);
      if (proto !== Object.prototype && proto !== null) continue;
      for (const key of Object.keys(item)) stack.push((item as Record<string, unknown>)[key]);
    }
  }
  return released;
}

/**
 * A JS-owned copy of a host leaf, releasing the pinned block it viewed (for
 * `DeviceTensor.toHost()`, which promises a fresh ArrayBuffer). Leaves that
 * are not pinned come back as they are.
 */
export function ownedCopy(leaf: TypedArray | Tensor): TypedArray | Tensor {
  if (!isPinnedHostOutput(leaf)) return leaf;
  const data = leaf instanceof Tensor ? leaf.data : leaf;
  const copy = (data as Uint8Array).slice() as unknown as TypedArray;
  releasePinned(data);
  // The output's shape is frozen already (made by a copy): shared as it is.
  return leaf instanceof Tensor ? trustedTensor(copy, leaf.shape, leaf.dtype) : copy;
}

setTensorDisposeHook((tensor) => releasePinned(tensor), (data) => {
  const buffer = bufferUnder(data);
  return buffer !== undefined && pinned.has(buffer as ArrayBuffer) && !isDetached(buffer);
});
