/**
 * Results moved between threads. Structured cloning drops our objects'
 * private state, so the hand-off is explicit: {@link moveResult} turns a
 * result (DeviceTensors, pinned host tensors and arrays, pageable Tensors,
 * plain data, inside arrays, plain objects and Maps) or an error into one
 * plain message, whose C references travel in a parcel (mtc/owner.h);
 * {@link takeResult} on the receiving thread rebuilds the result, owning
 * them. The message is described by message.ts; this file walks the value.
 *
 * @module
 */

import { MtcError, Status } from "../base/errors.ts";
import { AsyncCopyHandle } from "../copy/handle.ts";
import { library } from "../ffi/library.ts";
import { createOwner, OWNER_PARCEL, releaseBlockRef, threadOwnerId } from "../ffi/owner.ts";
import { BlockHolder } from "../gpu/block.ts";
import {
  DeviceTensor,
  holderOf,
  isDeviceTensor,
  tensorAddress,
  tensorBytes,
  tensorDevice,
  tensorDisposed,
  tensorDType,
  tensorKeepsTensor,
  tensorOffset,
  tensorShape,
} from "../tensor/device_tensor.ts";
import { DTYPES, type DType, isTypedArray, naturalDType, type TypedArray, viewStorage } from "../tensor/dtype.ts";
import { pinnedBlockOf, pinnedBuffer, releasePinned } from "../tensor/host_output.ts";
import { frozenShape } from "../tensor/shape.ts";
import { Tensor, trustedTensor } from "../tensor/tensor.ts";
import { bufferUnder, viewByteLength, viewByteOffset } from "../base/views.ts";
import {
  collectContainers,
  DEVICE,
  errorFromMessage,
  errorMessage,
  F,
  FIELDS,
  isMoved,
  KEEPS_TENSOR,
  type Moved,
  MOVED,
  movedPath,
  NATURAL,
  PACKED,
  PINNED,
  placeLeaf,
  TENSOR,
  type TensorExtra,
} from "./message.ts";

export { isMoved, type Moved } from "./message.ts";

/** Walks `value` once, mirroring its containers; what moveResult sends. */
class Outgoing {
  readonly containers: object[] = [];
  /** Per container: its parent container and its slot there (for leaf paths in errors). */
  readonly parents: number[] = [];
  readonly parentSlots: (string | number)[] = [];
  readonly nums: number[] = [];
  readonly slots: (string | number)[] = [];
  readonly dims: number[] = [];
  readonly extras: (TensorExtra | null)[] = [];
  /** Distinct blocks: pointer → index; per index, [block, ref, base, bytes]. */
  readonly blockIndex = new Map<number, number>();
  readonly blocks: number[] = [];
  readonly devices: DeviceTensor[] = [];
  readonly pinnedLeaves: (TypedArray | Tensor)[] = [];
  readonly seen = new Map<object, object>();
  root: unknown = null;

  path(container: number, slot: string | number): string {
    return movedPath(this.parents, this.parentSlots, this.containers, container, slot);
  }

  /** The block's index in the message, adding it (with its base address and bytes) on first sight. */
  block(block: number, base: number, bytes: number): number {
    let index = this.blockIndex.get(block);
    if (index === undefined) {
      index = this.blockIndex.size;
      this.blockIndex.set(block, index);
      this.blocks.push(block, 0, base, bytes);
    }
    return index;
  }

  /** Records leaf `value` at `slot` of container `c` (-1: the root); false when it is no leaf. */
  leaf(value: object, c: number, slot: string | number): boolean {
    if (value instanceof DeviceTensor) {
      if (!isDeviceTensor(value)) throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "moveResult: not a DeviceTensor made by this library", { path: this.path(c, slot) });
      if (tensorDisposed(value)) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "moveResult: the DeviceTensor was disposed (or moved already)", { path: this.path(c, slot) });
      const block = value.block;
      const b = block === 0 ? -1 : this.block(block, 0, 0);
      const shape = tensorShape(value);
      const flags = (value.packed ? PACKED : 0) | (tensorKeepsTensor(value) ? KEEPS_TENSOR : 0);
      this.push(DEVICE, c, slot, b, tensorAddress(value), tensorOffset(value), tensorBytes(value), tensorDevice(value), tensorDType(value), flags, shape, null);
      this.devices.push(value);
      return true;
    }
    const tensor = value instanceof Tensor ? value : null;
    const data = tensor !== null ? tensor.data : isTypedArray(value) ? value : null;
    if (data === null) return false;
    const buffer = bufferUnder(data)!;
    const pinned = pinnedBlockOf(buffer);
    if (pinned === undefined) {
      if (tensor === null) return false; // a pageable array: cloned with the containers
      const extra: TensorExtra = { data, strides: tensor.strides, offset: tensor.offset };
      this.push(TENSOR, c, slot, -1, 0, 0, 0, 0, tensor.dtype, 0, tensor.shape, extra);
      return true;
    }
    if (!pinned.releasable) {
      throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "moveResult: an arena's tensor cannot be moved (the arena owns its memory): move the copy's result instead", { path: this.path(c, slot) });
    }
    const lib = library();
    const base = lib.backend.pointerOf(new Uint8Array(buffer as ArrayBuffer, 0, 1)); // not empty: an empty view may say 0
    const b = this.block(pinned.block, base, (buffer as ArrayBuffer).byteLength);
    const dtype = tensor !== null ? tensor.dtype : naturalDType(data)!;
    const extra = tensor !== null && tensor.strides !== undefined ? { strides: tensor.strides, offset: tensor.offset } : null;
    const shape = tensor !== null ? tensor.shape : [data.length];
    this.push(PINNED, c, slot, b, viewByteOffset(data), viewByteLength(data), data.length, 0, dtype, tensor === null ? NATURAL : 0, shape, extra);
    this.pinnedLeaves.push(value as TypedArray | Tensor);
    return true;
  }

  push(kind: number, c: number, slot: string | number, block: number, a: number, b: number, bytes: number, device: number, dtype: DType, flags: number, shape: readonly number[], extra: TensorExtra | null): void {
    this.nums.push(kind, c, block, a, b, bytes, device, DTYPES.indexOf(dtype), flags, shape.length);
    for (const extent of shape) this.dims.push(extent);
    this.slots.push(slot);
    this.extras.push(extra);
  }

  /** A container's mirror (made on first sight, numbered in the order the receiver numbers the clone's). */
  container(value: object, parent: number, slot: string | number, queue: object[]): object | undefined {
    const known = this.seen.get(value);
    if (known !== undefined) return known;
    let mirror: object;
    if (Array.isArray(value)) mirror = new Array(value.length);
    else if (value instanceof Map) mirror = new Map();
    else {
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return undefined;
      mirror = {};
    }
    this.seen.set(value, mirror);
    this.containers.push(mirror);
    this.parents.push(parent);
    this.parentSlots.push(slot);
    queue.push(value);
    return mirror;
  }

  /** Mirrors `value`, recording its leaves. */
  walk(value: unknown): void {
    if (typeof value !== "object" || value === null) {
      this.root = value;
      return;
    }
    if (this.leaf(value, -1, "")) return;
    // Breadth first, each container once: the receiver numbers the clone's containers the same way.
    const queue: object[] = [];
    const rootMirror = this.container(value, -1, "", queue);
    this.root = rootMirror ?? value;
    for (let c = 0; c < queue.length; c++) {
      const input = queue[c]!;
      const mirror = this.containers[c]!;
      const put = (slot: string | number, child: unknown, set: (v: unknown) => void) => {
        if (typeof child !== "object" || child === null) return set(child);
        if (this.leaf(child, c, slot)) return set(null);
        const m = this.container(child, c, slot, queue);
        set(m ?? child);
      };
      if (Array.isArray(input)) {
        const out = mirror as unknown[];
        for (let i = 0; i < input.length; i++) put(i, input[i], (v) => (out[i] = v));
      } else if (input instanceof Map) {
        const out = mirror as Map<unknown, unknown>;
        let i = 0;
        for (const [k, v] of input) put(i++, v, (m) => out.set(k, m));
      } else {
        const out = mirror as Record<string, unknown>;
        for (const key of Object.keys(input)) put(key, (input as Record<string, unknown>)[key], (v) => (out[key] = v));
      }
    }
  }
}

/**
 * Moves a result out of this thread: returns one plain message to post
 * (`postMessage(moveResult(x))`), and the sender's objects become disposed
 * (DeviceTensors) or empty (pinned host arrays and tensors: the whole
 * pinned block moves, and every view of it here is emptied). The C
 * references travel in a parcel that belongs to no thread: it outlives the
 * sender (a terminated worker), and is given back when taken, dropped
 * ({@link dropMoved}, {@link dropMovedFrom}) or the process exits.
 *
 * `value`: a result (DeviceTensors, pinned or pageable host Tensors and
 * arrays, plain data, inside arrays, plain objects and Maps), an
 * AsyncCopyHandle (its result: this waits for the copy, then disposes the
 * handle), or an Error (MtcError keeps its status, code and leaf path).
 * An arena's tensors cannot be moved (MtcError naming the leaf): move the
 * copy's result.
 *
 * @example
 * ```ts
 * // in a worker:
 * const onGpu = await startCopy(batch, "cuda:0");
 * postMessage(moveResult(onGpu));
 * // on the main thread:
 * worker.onmessage = (e) => { const batch = takeResult(e.data); ... };
 * ```
 */
export function moveResult<T>(value: T | AsyncCopyHandle<T>): Moved<T> {
  const sender = threadOwnerId();
  if (value instanceof AsyncCopyHandle) {
    const result = value.get();
    value.dispose();
    return moveResult(result as T);
  }
  if (value instanceof Error) return { mtc: MOVED, parcel: 0, sender, error: errorMessage(value) } as Moved<T>;
  const out = new Outgoing();
  out.walk(value);
  const blockCount = out.blockIndex.size;
  let parcel = 0;
  if (blockCount > 0) {
    if (sender === 0) throw new MtcError(Status.MTC_ERR_UNSUPPORTED, "moveResult: this libmtc has no owners (older than the bindings): results in GPU or pinned memory cannot move");
    parcel = createOwner(OWNER_PARCEL, sender, "moveResult");
    const sym = library().symbols;
    for (let i = 0; i < blockCount; i++) {
      const ref = sym.mtc_ref_retain_block!(parcel, out.blocks[i * 4]!);
      if (ref === 0) {
        sym.mtc_owner_release!(parcel);
        throw new MtcError(Status.MTC_ERR_INTERNAL, `moveResult: ${sym.mtc_last_error()}`);
      }
      out.blocks[i * 4 + 1] = ref;
    }
  }
  // The parcel holds its own references: the sender's go with its objects.
  for (const tensor of out.devices) tensor.dispose();
  for (const leaf of out.pinnedLeaves) releasePinned(leaf);
  return {
    mtc: MOVED,
    parcel,
    sender,
    root: out.root,
    nums: new Float64Array(out.nums),
    slots: out.slots,
    dims: new Float64Array(out.dims),
    extras: out.extras.some((e) => e !== null) ? out.extras : null,
    blocks: new Float64Array(out.blocks),
  } as Moved<T>;
}

/**
 * Takes a moved result on this thread, once: returns the value, whose
 * references are now this thread's (given back by dispose, disposeAll, the
 * garbage collector, or C when this thread exits). A moved error comes back
 * as an MtcError (or Error), returned, not thrown, with the sender's
 * stack. A message taken already, or dropped, is an MtcError
 * (MTC_ERR_INVALID_STATE).
 */
export function takeResult<T>(message: Moved<T>): T {
  if (!isMoved(message)) throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "takeResult: not a message of moveResult");
  const m = message as Required<Moved<T>>;
  if (m.error !== undefined) return errorFromMessage(m.error) as T;
  const lib = library();
  const sym = lib.symbols;
  if (m.parcel !== 0) {
    const status = sym.mtc_owner_take!(m.parcel, threadOwnerId());
    if (status !== Status.MTC_OK) {
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, `takeResult: this result was taken already, or dropped (parcel ${m.parcel})`);
    }
  }
  // Every ref is this thread's now: each gets its holder before anything can throw.
  const blocks = m.blocks;
  const holders: (BlockHolder | ArrayBuffer)[] = [];
  try {
    for (let i = 0; i < blocks.length; i += 4) {
      const block = blocks[i]!, ref = blocks[i + 1]!, base = blocks[i + 2]!, bytes = blocks[i + 3]!;
      holders.push(bytes === 0 && base === 0 ? new BlockHolder(block, ref) : pinnedBuffer(lib, block, base, bytes, true, ref));
    }
  } catch (e) {
    for (let i = holders.length * 4; i < blocks.length; i += 4) releaseBlockRef(blocks[i + 1]!);
    throw e;
  }
  const containers = collectContainers(m.root);
  const nums = m.nums;
  let root = m.root;
  let dim = 0;
  for (let at = 0, leaf = 0; at < nums.length; at += FIELDS, leaf++) {
    const kind = nums[at + F.kind]!;
    const dtype = DTYPES[nums[at + F.dtype]!]!;
    const ndim = nums[at + F.ndim]!;
    const shape = frozenShape(Array.from(m.dims.subarray(dim, dim + ndim)));
    dim += ndim;
    const flags = nums[at + F.flags]!;
    const b = nums[at + F.block]!;
    let value: unknown;
    if (kind === DEVICE) {
      const holder = b < 0 ? null : holders[b] as BlockHolder;
      holder?.acquire();
      value = new DeviceTensor(nums[at + F.a]!, shape, dtype, nums[at + F.device]!, nums[at + F.bytes]!, holder?.block ?? 0, nums[at + F.b]!, (flags & PACKED) !== 0, holder, (flags & KEEPS_TENSOR) !== 0);
    } else if (kind === PINNED) {
      value = pinnedLeaf(holders[b] as ArrayBuffer, nums[at + F.a]!, nums[at + F.bytes]!, dtype, shape, flags, m.extras?.[leaf] ?? null);
    } else {
      const extra = m.extras![leaf]!;
      value = new Tensor(extra.data!, shape, dtype, extra.strides === undefined ? undefined : { strides: extra.strides, offset: extra.offset });
    }
    const c = nums[at + F.container]!;
    if (c < 0) root = value;
    else placeLeaf(containers[c]!, m.slots[leaf]!, value);
  }
  return root as T;
}

/** A pinned leaf of the receiver's buffer: `elements` at `byteOffset`, as the sender had it. */
function pinnedLeaf(buffer: ArrayBuffer, byteOffset: number, elements: number, dtype: DType, shape: readonly number[], flags: number, extra: TensorExtra | null): TypedArray | Tensor {
  const data = viewStorage(dtype, buffer, byteOffset, elements)!; // aligned: the sender's view was
  if ((flags & NATURAL) !== 0) return data;
  if (extra !== null) return new Tensor(data, shape, dtype, { strides: extra.strides!, offset: extra.offset });
  return trustedTensor(data, shape, dtype);
}

/** Gives back a message's references without taking it (a message no thread will take). Taken already or dropped: nothing. */
export function dropMoved(message: Moved): void {
  if (!isMoved(message) || message.parcel === 0) return;
  const release = library().symbols.mtc_owner_release;
  if (release !== undefined && library().symbols.mtc_owner_alive!(message.parcel) === 1) release(message.parcel);
}

/**
 * Gives back every parcel that `owner` (a thread's owner id, from
 * {@link threadOwner}) sent and nobody took: messages lost with a worker
 * that was terminated, or a port that was closed. Returns how many.
 */
export function dropMovedFrom(owner: number): number {
  const drop = library().symbols.mtc_owner_drop_parcels;
  return drop === undefined ? 0 : drop(owner);
}

/** This thread's owner id: post it to whoever may terminate this thread (it names the parcels this thread sends). */
export function threadOwner(): number {
  return threadOwnerId();
}

/** False once `owner` ended: a thread's owner ends when its thread exits (C then gave back what it held). */
export function ownerAlive(owner: number): boolean {
  const alive = library().symbols.mtc_owner_alive;
  return alive !== undefined && alive(owner) === 1;
}

/** True when a moved message carries an error. */
export function movedError(message: Moved): boolean {
  return isMoved(message) && message.error !== undefined;
}
