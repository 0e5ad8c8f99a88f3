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
import { createOwner, OWNER_PARCEL, threadOwnerId } from "../ffi/owner.ts";
import {
  DeviceTensor,
  isDeviceTensor,
  tensorAddress,
  tensorBlock,
  tensorBytes,
  tensorDevice,
  tensorDisposed,
  tensorDType,
  tensorKeepsTensor,
  tensorOffset,
  tensorPacked,
  tensorShape,
} from "../tensor/device_tensor.ts";
import { DTYPES, type DType, isTypedArray, naturalDType, type TypedArray } from "../tensor/dtype.ts";
import { pinnedBlockOf, releasePinned } from "../tensor/host_output.ts";
import { Tensor } from "../tensor/tensor.ts";
import { bufferUnder, viewByteLength, viewByteOffset } from "../base/views.ts";
import {
  ARRAY,
  BARE_OBJECT,
  DATA,
  DEVICE,
  errorMessage,
  isMoved,
  KEEPS_TENSOR,
  LEAF,
  MAP,
  type Moved,
  MOVED,
  NATURAL,
  OBJECT,
  PACKED,
  PINNED,
  TENSOR,
  type TensorExtra,
} from "./message.ts";

export { isMoved, type Moved, type MovedError, type TensorExtra } from "./message.ts";
export { takeResult } from "./take.ts";

/** Walks `value` once, breadth first, writing the template, the leaves and the data; what moveResult sends. */
class Outgoing {
  readonly template: (string | number)[][] = [];
  readonly containers: object[] = [];
  /** Per container: its parent container and its slot there (for leaf paths in errors). */
  readonly parents: number[] = [];
  readonly parentSlots: (string | number)[] = [];
  readonly nums: number[] = [];
  readonly dims: number[] = [];
  readonly data: unknown[] = [];
  readonly extras: (TensorExtra | null)[] = [];
  /** Distinct blocks: pointer → index; per index, [block, ref, base, bytes]. */
  readonly blockIndex = new Map<number, number>();
  readonly blocks: number[] = [];
  readonly devices: DeviceTensor[] = [];
  readonly pinnedLeaves: (TypedArray | Tensor)[] = [];
  /** Per pinned leaf: the view read, and the block it was in. */
  readonly pinnedViews: { data: TypedArray; block: number }[] = [];
  /** Where each DeviceTensor and each pinned leaf was found: its container and slot, two entries a leaf. */
  readonly devicePlaces: (string | number)[] = [];
  readonly pinnedPlaces: (string | number)[] = [];
  readonly seen = new Map<object, number>();
  root = DATA;

  /** The path of `slot` in container `c` (-1: the root itself), as leaf paths are written (".a[0]"). */
  path(c: number, slot: string | number): string {
    const parts: string[] = [];
    for (let at = slot; c >= 0; at = this.parentSlots[c]!, c = this.parents[c]!) {
      const node = this.containers[c];
      parts.push(Array.isArray(node) || node instanceof Map ? `[${String(at)}]` : `.${String(at)}`);
    }
    return parts.reverse().join("");
  }

  /**
   * The block's index in the message, adding it on first sight, with its
   * base address and bytes when `buffer` is its pinned buffer (0, 0 for
   * device memory).
   */
  block(block: number, buffer: ArrayBuffer | null): number {
    let index = this.blockIndex.get(block);
    if (index === undefined) {
      index = this.blockIndex.size;
      this.blockIndex.set(block, index);
      // A view of one byte: an empty one may say address 0.
      const base = buffer === null ? 0 : library().backend.pointerOf(new Uint8Array(buffer, 0, 1));
      this.blocks.push(block, 0, base, buffer === null ? 0 : buffer.byteLength);
    }
    return index;
  }

  /** Records leaf `value` at `slot` of container `c` (-1: the root); false when it is no leaf. */
  leaf(value: object, c: number, slot: string | number): boolean {
    if (value instanceof DeviceTensor) {
      if (!isDeviceTensor(value)) throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "moveResult: not a DeviceTensor made by this library", { path: this.path(c, slot) });
      if (tensorDisposed(value)) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "moveResult: the DeviceTensor was disposed (or moved already)", { path: this.path(c, slot) });
      const block = tensorBlock(value);
      const b = block === 0 ? -1 : this.block(block, null);
      const flags = (tensorPacked(value) ? PACKED : 0) | (tensorKeepsTensor(value) ? KEEPS_TENSOR : 0);
      this.push(DEVICE, b, tensorAddress(value), tensorOffset(value), tensorBytes(value), tensorDevice(value), tensorDType(value), flags, tensorShape(value), null);
      this.devices.push(value);
      this.devicePlaces.push(c, slot);
      return true;
    }
    const tensor = value instanceof Tensor ? value : null;
    const data = tensor !== null ? tensor.data : isTypedArray(value) ? value : null;
    if (data === null) return false;
    const buffer = bufferUnder(data)!;
    const pinned = pinnedBlockOf(buffer);
    if (pinned === undefined) {
      if (tensor === null) return false; // a pageable array: data, cloned
      const extra: TensorExtra = { data, strides: tensor.strides, offset: tensor.offset };
      this.push(TENSOR, -1, 0, 0, 0, 0, tensor.dtype, 0, tensor.shape, extra);
      return true;
    }
    if (!pinned.releasable) {
      throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "moveResult: an arena's tensor cannot be moved (the arena owns its memory): move the copy's result instead", { path: this.path(c, slot) });
    }
    const b = this.block(pinned.block, buffer as ArrayBuffer);
    const dtype = tensor !== null ? tensor.dtype : naturalDType(data)!;
    const extra = tensor !== null && tensor.strides !== undefined ? { strides: tensor.strides, offset: tensor.offset } : null;
    const shape = tensor !== null ? tensor.shape : [data.length];
    this.push(PINNED, b, viewByteOffset(data), data.length, viewByteLength(data), 0, dtype, tensor === null ? NATURAL : 0, shape, extra);
    this.pinnedLeaves.push(value as TypedArray | Tensor);
    this.pinnedViews.push({ data, block: pinned.block });
    this.pinnedPlaces.push(c, slot);
    return true;
  }

  push(kind: number, block: number, a: number, b: number, bytes: number, device: number, dtype: DType, flags: number, shape: readonly number[], extra: TensorExtra | null): void {
    // Indexed writes: a push of nine values, or a for-of over a frozen
    // shape, cost JavaScriptCore several times as much.
    const nums = this.nums;
    const at = nums.length;
    nums[at] = kind;
    nums[at + 1] = block;
    nums[at + 2] = a;
    nums[at + 3] = b;
    nums[at + 4] = bytes;
    nums[at + 5] = device;
    nums[at + 6] = DTYPE_CODE[dtype];
    nums[at + 7] = flags;
    nums[at + 8] = shape.length;
    const dims = this.dims;
    for (let i = 0; i < shape.length; i++) dims[dims.length] = shape[i]!;
    this.extras[this.extras.length] = extra;
  }

  /**
   * After the walk, before any C call: every leaf it recorded is still what
   * it was. A getter read later in the walk may have disposed a DeviceTensor
   * or released a pinned array recorded earlier; its block could be gone.
   */
  checkAlive(): void {
    for (let i = 0; i < this.devices.length; i++) {
      if (tensorDisposed(this.devices[i]!)) {
        const path = this.path(this.devicePlaces[2 * i] as number, this.devicePlaces[2 * i + 1]!);
        throw new MtcError(Status.MTC_ERR_INVALID_STATE, "moveResult: the DeviceTensor was disposed while the value was read (by a getter in it?)", { path });
      }
    }
    for (let i = 0; i < this.pinnedViews.length; i++) {
      const { data, block } = this.pinnedViews[i]!;
      if (pinnedBlockOf(bufferUnder(data)!)?.block !== block) {
        const path = this.path(this.pinnedPlaces[2 * i] as number, this.pinnedPlaces[2 * i + 1]!);
        throw new MtcError(Status.MTC_ERR_INVALID_STATE, "moveResult: the pinned memory was released while the value was read (by a getter in it?)", { path });
      }
    }
  }

  /** The code of `value` at `slot` of container `c`: a container's number (numbering it on first sight), LEAF or DATA. */
  code(value: unknown, c: number, slot: string | number): number {
    if (typeof value === "object" && value !== null) {
      if (this.leaf(value, c, slot)) return LEAF; // before the lookup: most values are leaves
      const known = this.seen.get(value);
      if (known !== undefined) return known;
      const kind = Array.isArray(value) ? ARRAY : value instanceof Map ? MAP : plainKind(value);
      if (kind >= 0) {
        const n = this.containers.length;
        this.seen.set(value, n);
        this.containers.push(value);
        this.parents.push(c);
        this.parentSlots.push(slot);
        this.template.push([kind]);
        return n;
      }
    }
    this.data.push(value);
    return DATA;
  }

  /** Walks `value`: its containers in the order they were numbered, each entry once. */
  walk(value: unknown): void {
    this.root = this.code(value, -1, "");
    for (let c = 0; c < this.containers.length; c++) {
      const input = this.containers[c]!;
      const entries = this.template[c]!;
      if (Array.isArray(input)) {
        for (let i = 0; i < input.length; i++) entries.push(this.code(input[i], c, i));
      } else if (input instanceof Map) {
        let i = 0;
        for (const [k, v] of input) {
          this.data.push(k);
          entries.push(DATA, this.code(v, c, i++));
        }
      } else {
        for (const key of Object.keys(input)) entries.push(key, this.code((input as Record<string, unknown>)[key], c, key));
      }
    }
  }
}

/** OBJECT for a plain object, BARE_OBJECT for one without a prototype, -1 for anything else (data). */
function plainKind(value: object): number {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype ? OBJECT : proto === null ? BARE_OBJECT : -1;
}

/** The last template sent and its text: a loader sends one structure again and again. */
let lastTemplate: (string | number)[][] = [];
let lastText = "[]";

/** `template` as JSON, the text of the last one when they are the same (a compare costs less than a stringify). */
function templateText(template: (string | number)[][]): string {
  let same = template.length === lastTemplate.length;
  for (let c = 0; same && c < template.length; c++) {
    const a = template[c]!, b = lastTemplate[c]!;
    if (a.length !== b.length) same = false;
    for (let i = 0; same && i < a.length; i++) same = a[i] === b[i];
  }
  if (!same) {
    lastTemplate = template;
    lastText = JSON.stringify(template);
  }
  return lastText;
}

const DTYPE_CODE = Object.fromEntries(DTYPES.map((d, i) => [d, i])) as Record<DType, number>;

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
  out.walk(value); // every user getter and trap runs here, once
  out.checkAlive();
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
    template: templateText(out.template),
    nums: new Float64Array(out.nums),
    dims: new Float64Array(out.dims),
    data: out.data,
    extras: out.extras.some((e) => e !== null) ? out.extras : null,
    blocks: new Float64Array(out.blocks),
  } as Moved<T>;
}

/** Gives back a message's references without taking it (a message no thread will take). Taken already or dropped: nothing. */
export function dropMoved(message: Moved): void {
  if (!isMoved(message)) return;
  const parcel = message.parcel; // read once
  const release = library().symbols.mtc_owner_release;
  // A parcel taken or dropped already has ended: C refuses it, which is the no-op wanted.
  if (release !== undefined && Number.isSafeInteger(parcel) && parcel > 0) release(parcel);
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
