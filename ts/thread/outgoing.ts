/**
 * The sending side of a moved result (move.ts): one walk of the value that
 * writes the message's template, leaf rows and data, and records which
 * DeviceTensors and pinned views it found, in which blocks, where (for
 * errors naming the leaf). It reads each leaf's private state once, and
 * refuses what cannot move: look-alikes, disposed or released leaves, an
 * arena's tensors, and memory the library does not own (fromDLPack's).
 *
 * @module
 */

import { otherCopyError, otherCopyMark } from "../base/copy_identity.ts";
import { MtcError, Status } from "../base/errors.ts";
import { bufferUnder, isDetached, viewByteLength, viewByteOffset } from "../base/views.ts";
import {
  DeviceTensor,
  holderOf,
  isDeviceTensor,
  tensorBlock,
  tensorDevice,
  tensorDisposed,
  tensorDType,
  tensorKeepsTensor,
  tensorOffset,
  tensorPacked,
  tensorShape,
} from "../tensor/device_tensor.ts";
import { DTYPES, type DType, isTypedArray, naturalDType, type TypedArray } from "../tensor/dtype.ts";
import { pinnedBlockOf } from "../tensor/host_output.ts";
import { releasedData, Tensor } from "../tensor/tensor.ts";
import { ARRAY, BARE_OBJECT, DATA, DEVICE, FIELDS, KEEPS_TENSOR, LEAF, MAP, NATURAL, OBJECT, PACKED, PINNED, TENSOR, type TensorExtra } from "./message.ts";

/** Walks `value` once, breadth first, writing the template, the leaves and the data; what moveResult sends. */
export class Outgoing {
  readonly template: (string | number)[][] = [];
  readonly containers: object[] = [];
  /** Per container: its parent container and its slot there (for leaf paths in errors). */
  readonly parents: number[] = [];
  readonly parentSlots: (string | number)[] = [];
  /** The leaf rows and their shapes, written straight into doubles (a JavaScript array of small integers costs a slow conversion to send). */
  nums: Float64Array = new Float64Array(FIELDS * 64);
  numCount = 0;
  dims: Float64Array = new Float64Array(128);
  dimCount = 0;
  readonly data: unknown[] = [];
  readonly extras: (TensorExtra | null)[] = [];
  /** Distinct blocks: pointer → index (the order the parcel is given them); per index, the block, and where its first leaf is (container, slot). */
  readonly blockIndex = new Map<number, number>();
  readonly blocks: number[] = [];
  readonly blockPlaces: (string | number)[] = [];
  /** Per index, true for a pinned block. */
  readonly pinnedBlocks: boolean[] = [];
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

  /** The block's index in the message, adding it on first sight (found at `slot` of container `c`). */
  block(block: number, pinned: boolean, c: number, slot: string | number): number {
    let index = this.blockIndex.get(block);
    if (index === undefined) {
      index = this.blockIndex.size;
      this.blockIndex.set(block, index);
      this.blocks.push(block);
      this.pinnedBlocks.push(pinned);
      this.blockPlaces.push(c, slot);
    }
    return index;
  }

  /** Records leaf `value` at `slot` of container `c` (-1: the root); false when it is no leaf. */
  leaf(value: object, c: number, slot: string | number): boolean {
    if (value instanceof DeviceTensor) {
      if (!isDeviceTensor(value)) throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "moveResult: not a DeviceTensor made by this library", { path: this.path(c, slot) });
      if (tensorDisposed(value)) throw new MtcError(Status.MTC_ERR_INVALID_STATE, "moveResult: the DeviceTensor was disposed (or moved already)", { path: this.path(c, slot) });
      const block = tensorBlock(value);
      if (block === 0 && holderOf(value) !== null) throw borrowed(this.path(c, slot));
      const b = block === 0 ? -1 : this.block(block, false, c, slot);
      const flags = (tensorPacked(value) ? PACKED : 0) | (tensorKeepsTensor(value) ? KEEPS_TENSOR : 0);
      this.push(DEVICE, b, b < 0 ? 0 : tensorOffset(value), 0, tensorDevice(value), tensorDType(value), flags, tensorShape(value), null);
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
      const gone = viewByteLength(data) === 0 ? goneReason(data, buffer) : undefined;
      if (gone !== undefined) throw new MtcError(Status.MTC_ERR_INVALID_STATE, `moveResult: ${gone}`, { path: this.path(c, slot) });
      if (tensor === null) return false; // a pageable array: data, cloned
      const extra: TensorExtra = { data, strides: tensor.strides, offset: tensor.offset };
      this.push(TENSOR, -1, 0, 0, 0, tensor.dtype, 0, tensor.shape, extra);
      return true;
    }
    if (!pinned.releasable) {
      throw new MtcError(Status.MTC_ERR_INVALID_ARGUMENT, "moveResult: an arena's tensor cannot be moved (the arena owns its memory): move the copy's result instead", { path: this.path(c, slot) });
    }
    const b = this.block(pinned.block, true, c, slot);
    const dtype = tensor !== null ? tensor.dtype : naturalDType(data)!;
    const extra = tensor !== null && tensor.strides !== undefined ? { strides: tensor.strides, offset: tensor.offset } : null;
    const shape = tensor !== null ? tensor.shape : [data.length];
    this.push(PINNED, b, viewByteOffset(data), data.length, 0, dtype, tensor === null ? NATURAL : 0, shape, extra);
    this.pinnedLeaves.push(value as TypedArray | Tensor);
    this.pinnedViews.push({ data, block: pinned.block });
    this.pinnedPlaces.push(c, slot);
    return true;
  }

  push(kind: number, block: number, offset: number, length: number, device: number, dtype: DType, flags: number, shape: readonly number[], extra: TensorExtra | null): void {
    // Indexed writes: a push of eight values, or a for-of over a frozen
    // shape, cost JavaScriptCore several times as much.
    const at = this.numCount;
    if (at + FIELDS > this.nums.length) this.nums = grown(this.nums, at + FIELDS);
    if (this.dimCount + shape.length > this.dims.length) this.dims = grown(this.dims, this.dimCount + shape.length);
    const nums = this.nums;
    nums[at] = kind;
    nums[at + 1] = block;
    nums[at + 2] = offset;
    nums[at + 3] = length;
    nums[at + 4] = device;
    nums[at + 5] = DTYPE_CODE[dtype];
    nums[at + 6] = flags;
    nums[at + 7] = shape.length;
    this.numCount = at + FIELDS;
    const dims = this.dims;
    let d = this.dimCount;
    for (let i = 0; i < shape.length; i++) dims[d++] = shape[i]!;
    this.dimCount = d;
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
      // Data cloned as it is, unless it is an object of another copy of the library (its state cannot move).
      const other = otherCopyMark(value);
      if (other !== undefined) throw otherCopyError(other, this.path(c, slot), "moveResult: ");
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

/** `array` copied into one of at least `least` elements (twice as many, at least). */
function grown(array: Float64Array, least: number): Float64Array {
  const more = new Float64Array(Math.max(least, 2 * array.length));
  more.set(array);
  return more;
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
export function templateText(template: (string | number)[][]): string {
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

/** The error for a DeviceTensor imported by fromDLPack: its memory is the producer's, freed by its deleter when this tensor goes. */
function borrowed(path: string): MtcError {
  return new MtcError(
    Status.MTC_ERR_INVALID_ARGUMENT,
    "moveResult: this DeviceTensor was imported by fromDLPack: its memory is another library's, freed by that library's deleter with this tensor, so it cannot move; " +
      "copy it into memory of libmtc's first (copyInto(tensor, DeviceTensor.empty(tensor.shape, tensor.dtype, tensor.device))) and move the copy, or hand the DLPack tensor itself to the other thread",
    { path },
  );
}

/** Why an empty view cannot move: the library's memory under it was released (moved already?), or its buffer was detached; else undefined. */
function goneReason(data: TypedArray, buffer: ArrayBufferLike): string | undefined {
  const released = releasedData(data, "its");
  if (released !== undefined) return `${released.replace(/; it cannot be copied$/, "")}: it was moved already, or given back, and cannot be moved`;
  return buffer instanceof ArrayBuffer && isDetached(buffer) ? "its ArrayBuffer was detached: there is nothing to move" : undefined;
}

