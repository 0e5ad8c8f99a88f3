/**
 * Arenas: one pinned region that a loader fills batch by batch. Tensors are
 * handed out one after another, then the whole region is reused for the
 * next batch once no copy reads it any more.
 *
 * @module
 */

import { type DType, DTYPE_SIZE, isDType, naturalDType, type StorageFor, type TypedArray, valuesPerElement, viewStorage } from "./dtype.ts";
import { constructedShape, releasedData, Tensor, trustedTensor } from "./tensor.ts";
import {
  type DeviceTensor,
  holderOf,
  isDeviceTensor,
  makeDeviceTensor,
  notADeviceTensor,
  tensorAddress,
  tensorBlock,
  tensorBytes,
  tensorDevice,
  tensorDisposed,
  tensorOffset,
} from "./device_tensor.ts";
import { tooLarge, vectorShape } from "./shape.ts";
import { pinnedBuffer, releasePinned } from "./host_output.ts";
import { allocatePinnedBlock, checkedLayout, type PinnedOptions, readPinnedOptions } from "./pinned.ts";
import { invalidArgument, MtcError, showValue, Status } from "../base/errors.ts";
import { bufferUnder, isDetached, viewByteLength as viewByteLengthOf, viewByteOffset } from "../base/views.ts";
import { library, requireSymbol } from "../ffi/library.ts";
import { adoptBlockRef, releaseBlockRef } from "../ffi/owner.ts";
import { markClass } from "../base/copy_identity.ts";
import { defineInspect } from "../base/inspect.ts";

/** Where each tensor of an arena starts: a multiple of this (the copy packs at 16 by default; every dtype fits). */
export const ARENA_ALIGNMENT = 16;

/** Drops an arena's block when the arena is collected without dispose(). */
const registry = new FinalizationRegistry<number>(releaseBlockRef);

/**
 * Only this module holds it; the constructor takes it, so that no caller
 * makes an Arena around a block or an address of its choosing.
 */
const MADE_HERE = Symbol("made by libmtc");

/** What Arena#consolidate does: set by copy/arena_copy.ts (tensor/ imports nothing from copy/). */
let consolidateHook: ((arena: Arena, batch: unknown) => unknown) | null = null;

/** @internal Sets what Arena#consolidate does. */
export function setConsolidateHook(hook: (arena: Arena, batch: unknown) => unknown): void {
  consolidateHook = hook;
}

/**
 * A pinned region of `capacity` bytes that hands out host tensors one after
 * another (each at a multiple of 16 bytes), for a loader to fill. A copy to a
 * GPU reads arena tensors by DMA where they lie, and tensors next to each
 * other go as one DMA into one device block that keeps their layout; a
 * `copyInto` from a GPU writes arena destinations in place.
 *
 * Copies read (or write) the arena after `startCopy` returns, until they are
 * over. {@link Arena.reset} waits for that, then empties every view it
 * handed out (a stale view reads and writes nothing: its length is 0), and
 * the next batch starts at byte 0. Keep two or three arenas in rotation to
 * fill one while the others are copied.
 *
 * @example
 * ```ts
 * using arena = Arena.create(1 << 20);
 * const batch = { boxes: arena.tensor("float32", [100, 4]), ids: arena.array("int32", 100) };
 * batch.boxes.data.set(myBoxes);
 * const onGpu = await startCopy(batch, "cuda:0"); // one DMA, no staging
 * await arena.reset(); // once no copy reads it: the next batch
 * ```
 */
export class Arena {
  #block: number;
  /** This thread's ref for the arena's own reference to its block. */
  #ref: number;
  #address: number;
  #capacity: number;
  #used = 0;
  /** The buffer the current batch's views share; null until the first tensor after a reset. */
  #epoch: ArrayBuffer | null = null;
  #disposed = false;

  static {
    markClass(this, "Arena");
    // console.log: "Arena(1600 of 1048576 bytes used)", from its own state (busy would ask C).
    defineInspect<Arena>(this.prototype, "Arena", (a) => {
      if (!(#block in a)) return "Arena (not made by this library)";
      return a.#disposed ? `Arena(${a.#capacity} bytes, disposed)` : `Arena(${a.#used} of ${a.#capacity} bytes used)`;
    });
  }

  private constructor(made: symbol, block: number, address: number, capacity: number) {
    if (made !== MADE_HERE) throw invalidArgument("new Arena(): an Arena is made by Arena.create");
    this.#block = block;
    this.#ref = adoptBlockRef(block);
    this.#address = address;
    this.#capacity = capacity;
    registry.register(this, this.#ref, this);
  }

  /**
   * A new arena of `bytes` of pinned memory (counted against the limit on
   * pinned memory held by tensors and arenas, `setPinnedHeldLimit`). Throws
   * MtcError naming that limit when it would pass it. Without a GPU (no
   * CUDA driver, or none seen), pageable memory with the same API.
   */
  static create(bytes: number, options?: PinnedOptions): Arena {
    const read = readPinnedOptions("Arena.create", options);
    if (!Number.isSafeInteger(bytes) || bytes <= 0) throw invalidArgument(`Arena.create: bytes must be an integer > 0, got ${showValue(bytes)}`);
    const { block, address } = allocatePinnedBlock("Arena.create", bytes, read);
    return new Arena(MADE_HERE, block, address, bytes);
  }

  /** Bytes of pinned memory it holds. */
  get capacity(): number {
    return this.#capacity;
  }

  /** Bytes handed out since the last reset (alignment included). */
  get used(): number {
    return this.#used;
  }

  /** True after dispose(). */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** True while a copy submitted so far still reads or writes the arena (whether or not anyone awaits it). */
  get busy(): boolean {
    if (this.#disposed) return false;
    return requireSymbol("mtc_block_busy", "Arena")(this.#block) !== 0;
  }

  /**
   * Takes the next `bytes` of the current batch at ARENA_ALIGNMENT: their
   * offset in the batch's buffer (a number, not an object with the
   * buffer: arenas hand out tensors by the hundred a batch).
   */
  #take(call: string, bytes: number): number {
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${call}: the arena was disposed`);
    const offset = Math.ceil(this.#used / ARENA_ALIGNMENT) * ARENA_ALIGNMENT;
    if (offset + bytes > this.#capacity) {
      throw new MtcError(
        Status.MTC_ERR_OUT_OF_MEMORY,
        `${call}: ${bytes} bytes do not fit the arena (${this.#used} of ${this.#capacity} bytes used); reset() it for the next batch or create a larger one`,
      );
    }
    this.#used = offset + bytes;
    return offset;
  }

  /**
   * @internal Takes every byte from `used` up to `end`, for a caller that
   * lays many tensors out in them itself (each at a multiple of
   * ARENA_ALIGNMENT): the buffer they lie in.
   */
  takeUpTo(call: string, end: number): ArrayBuffer {
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${call}: the arena was disposed`);
    if (!Number.isSafeInteger(end) || end < this.#used || end > this.#capacity) {
      throw new MtcError(Status.MTC_ERR_OUT_OF_MEMORY, `${call}: the arena's bytes up to ${end} cannot be taken (${this.#used} of ${this.#capacity} bytes used)`);
    }
    const buffer = this.#batchBuffer();
    this.#used = end;
    return buffer;
  }

  /** The buffer the current batch's views share, made at its first use (it holds a reference to the block). */
  #batchBuffer(): ArrayBuffer {
    return this.#epoch ??= pinnedBuffer(library(), this.#block, this.#address, this.#capacity, false);
  }

  /** The next tensor of `dtype` and `shape` in the arena, contents undefined. */
  tensor<D extends DType>(dtype: D, shape: readonly number[]): Tensor<D, StorageFor<D>> {
    const layout = checkedLayout("Arena.tensor", dtype, shape);
    const offset = this.#take("Arena.tensor", layout.bytes);
    return trustedTensor(viewStorage(dtype, this.#batchBuffer(), offset, layout.elements)!, layout.shape, dtype);
  }

  /** The next typed array of `length` elements of `dtype` (its natural kind) in the arena. */
  array<D extends DType>(dtype: D, length: number): StorageFor<D> {
    if (!Number.isSafeInteger(length) || length < 0) throw invalidArgument(`Arena.array: the length must be an integer >= 0, got ${showValue(length)}`);
    // checkedLayout's checks for the shape [length], without making one.
    if (!isDType(dtype)) throw invalidArgument(`Arena.array: unknown dtype ${showValue(dtype)}`);
    const bytes = length * DTYPE_SIZE[dtype];
    if (!Number.isSafeInteger(bytes)) throw invalidArgument(`Arena.array: ${tooLarge([length], dtype, length, DTYPE_SIZE[dtype])}`);
    const offset = this.#take("Arena.array", bytes);
    return viewStorage(dtype, this.#batchBuffer(), offset, length)! as StorageFor<D>;
  }

  /**
   * A copy of `batch` whose tensors (Tensor and typed-array leaves) live in
   * the arena, one after another in walk order, with the same containers
   * (arrays, plain objects, Maps), dtypes and shapes; other leaves are kept
   * as they are. For loaders that receive batches from elsewhere: one copy
   * of this then needs no staging. Strided Tensors are refused (with the
   * leaf's path); so is a batch that does not fit (nothing is taken then).
   */
  consolidate<T>(batch: T): T {
    if (consolidateHook === null) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "Arena.consolidate: the copy module is not loaded");
    return consolidateHook(this, batch) as T;
  }

  /**
   * The device twin of arena tensor `leaf` (a Tensor or typed array of this
   * arena's current batch) in `onDevice`, the result of
   * `startArenaCopy(arena, device)`: a DeviceTensor of the leaf's dtype and shape at
   * the same offset, sharing `onDevice`'s block (the block lives until every
   * twin and `onDevice` are disposed). Throws MtcError for a leaf of another
   * arena, one handed out before a reset, or one past the copied bytes.
   */
  twin(onDevice: DeviceTensor, leaf: Tensor | TypedArray): DeviceTensor {
    const data = leaf instanceof Tensor ? leaf.data : leaf;
    const offset = ArrayBuffer.isView(data) ? this.offsetOf(data) : undefined;
    // Use after dispose or reset: MTC_ERR_INVALID_STATE, as everywhere.
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "Arena.twin: the arena was disposed");
    const released = offset === undefined ? releasedData(data, "the leaf's") : undefined;
    if (released !== undefined) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `Arena.twin: ${released.replace(/; it cannot be copied$/, "")}`);
    if (offset === undefined) throw invalidArgument("Arena.twin: the leaf is no tensor of this arena's current batch (another arena's, or handed out before a reset)");
    const dtype = leaf instanceof Tensor ? leaf.dtype : naturalDType(data)!;
    // The shape the constructor froze, not a field reassigned since.
    const shape = leaf instanceof Tensor ? constructedShape(leaf) ?? leaf.shape : vectorShape(data.length / valuesPerElement(dtype));
    const bytes = leaf instanceof Tensor ? leaf.byteLength : viewByteLengthOf(data);
    return twinOf(onDevice, offset, bytes, dtype, shape, "Arena.twin");
  }

  /**
   * Starts the next batch, once no copy reads or writes the arena: every
   * view handed out before is emptied (length 0: a write through it goes
   * nowhere instead of into the next batch) and `used` is 0. Resolves then.
   * Rejects with MtcError when the arena was disposed meanwhile.
   */
  async reset(): Promise<void> {
    let pause = 0;
    while (this.busy) {
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause + 1, 4);
    }
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "Arena.reset: the arena was disposed");
    this.#startBatch();
  }

  /** {@link Arena.reset} if no copy reads or writes the arena now: true when it did, false (nothing changed) otherwise. */
  tryReset(): boolean {
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "Arena.tryReset: the arena was disposed");
    if (this.busy) return false;
    this.#startBatch();
    return true;
  }

  #startBatch(): void {
    if (this.#epoch !== null) releasePinned(this.#epoch, true);
    this.#epoch = null;
    this.#used = 0;
  }

  /**
   * @internal The byte offset of `view` in this arena's current batch, or
   * undefined when it is no view of it (another arena's, or one handed out
   * before a reset).
   */
  offsetOf(view: ArrayBufferView): number | undefined {
    const buffer = bufferUnder(view);
    if (this.#epoch === null || buffer !== this.#epoch || isDetached(buffer)) return undefined;
    return viewByteOffset(view);
  }

  /** @internal The current batch's used bytes as one Uint8Array (the whole-arena copy). */
  usedBytes(): Uint8Array {
    if (this.#disposed) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "the arena was disposed");
    return new Uint8Array(this.#batchBuffer(), 0, this.#used);
  }

  /**
   * Gives the pinned memory back: views become empty now; copies still
   * reading or writing it keep it until they are over. Idempotent.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#startBatch();
    registry.unregister(this);
    releaseBlockRef(this.#ref);
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * A DeviceTensor of `dtype` and `shape` (`bytes`) at byte `offset`
 * of `whole`, sharing its block: an arena tensor's device twin. Throws when
 * `whole` is disposed or the range lies past it.
 */
function twinOf(whole: DeviceTensor, offset: number, bytes: number, dtype: DType, shape: readonly number[], call: string): DeviceTensor {
  if (!isDeviceTensor(whole)) throw notADeviceTensor(undefined, `${call}: `);
  if (tensorDisposed(whole)) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `${call}: the device copy of the arena was disposed`);
  if (offset + bytes > tensorBytes(whole)) {
    throw invalidArgument(`${call}: the leaf (bytes ${offset}..${offset + bytes}) lies past the ${tensorBytes(whole)} bytes copied (handed out after the copy started?)`);
  }
  const holder = holderOf(whole);
  if (holder !== null) holder.acquire();
  // Its private state, never a getter an own property could shadow.
  return makeDeviceTensor(tensorAddress(whole) + offset, shape, dtype, tensorDevice(whole), bytes, tensorBlock(whole), tensorOffset(whole) + offset, true, holder);
}
