/**
 * Stage 2 of a copy, describe: what each listed leaf is (dtype, shape,
 * bytes, the view the copy reads), read once, and its `mtc_leaf` (40
 * bytes), written into one reusable buffer that `mtc_plan_add_leaves`
 * copies in a single call. The walk calls it for each leaf as it finds it,
 * so the batch is gone over once.
 *
 * @module
 */

import { DEVICE_CPU } from "../gpu/device.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import { type DeviceTensor, holderOf, makeDeviceTensor, tensorAddress, tensorBytes, tensorDevice, tensorDType, tensorKeepsTensor, tensorShape } from "../tensor/device_tensor.ts";
import { type DType, DTYPE_SIZE, isDType, storageElementBytes, type TypedArray, valuesPerElement } from "../tensor/dtype.ts";
import { invalidArgument, showValue } from "../base/errors.ts";
import { isResizable, viewBuffer, viewByteLength, viewSlice, viewSubarray } from "../base/views.ts";
import { checkedShape, elementCount, showShape, tooLarge, vectorShape } from "../tensor/shape.ts";
import { constructedShape, constructedSize, releasedData, type Tensor } from "../tensor/tensor.ts";
import { byteLayout, layoutProblem, layoutSpan } from "../tensor/strides.ts";
import { formatPath } from "./path.ts";
import type { Descriptors, Frame, Traversal } from "./traversal.ts";

/** sizeof(mtc_leaf). */
export const LEAF_BYTES = 40;
const LEAF_WORDS = LEAF_BYTES / 4;
const TWO_32 = 4294967296;

/** A host view's address (the runtime's), `bufferRead` saying that `.buffer` was just read. */
export type PointerOf = (view: ArrayBufferView, bufferRead?: boolean) => number;

function freshDescriptors(): Descriptors {
  return { words: new Uint32Array(64 * LEAF_WORDS) };
}

let spare: Descriptors | null = freshDescriptors();

/**
 * The reusable descriptor buffer, or a fresh one while it is in use (a
 * getter on a leaf starting a copy inside another). Give it back with
 * {@link releaseDescriptors}.
 */
export function takeDescriptors(): Descriptors {
  const d = spare ?? freshDescriptors();
  spare = null;
  return d;
}

/** Gives a descriptor buffer back for the next copy. */
export function releaseDescriptors(d: Descriptors): void {
  spare = d;
}

/** The descriptor words with room for leaf i (grown by doubling). */
function wordsFor(t: Traversal, i: number): Uint32Array {
  const w = t.descriptors.words;
  if ((i + 1) * LEAF_WORDS <= w.length) return w;
  const grown = new Uint32Array(Math.max(64, w.length / LEAF_WORDS * 2) * LEAF_WORDS);
  grown.set(w);
  t.descriptors.words = grown;
  return grown;
}

/** Writes one mtc_leaf at index i of words (grown by doubling when full); returns the words. */
export function putLeaf(words: Uint32Array, i: number, address: number, bytes: number, device: number, elementSize: number, flags = 0): Uint32Array {
  if ((i + 1) * LEAF_WORDS > words.length) {
    const grown = new Uint32Array(words.length * 2);
    grown.set(words);
    words = grown;
  }
  const at = i * LEAF_WORDS;
  words[at] = address >>> 0;
  words[at + 1] = (address / TWO_32) >>> 0;
  words[at + 2] = bytes >>> 0;
  words[at + 3] = (bytes / TWO_32) >>> 0;
  words[at + 4] = 0; // row_pitch
  words[at + 5] = 0;
  words[at + 6] = device >>> 0;
  words[at + 7] = elementSize;
  words[at + 8] = 0; // row_count: contiguous
  words[at + 9] = flags; // MTC_LEAF_* bits
  return words;
}

/**
 * mtc_leaf.flags: the leaf may lie in pinned memory of the library's: C
 * then holds that block and marks it busy until the copy is over (and reads
 * or writes it in place where it can).
 */
export const LEAF_PINNED = 2;

/** Writes leaf i's mtc_leaf: contiguous. */
function writeLeaf(t: Traversal, i: number, address: number, bytes: number, device: number, elementSize: number, flags = 0): void {
  putLeaf(wordsFor(t, i), i, address, bytes, device, elementSize, flags); // wordsFor made room: no growth
}

// Each describe* function lists one leaf (index t.count), writes its
// descriptor and returns what the walk places where the leaf was: for a
// device target its result, a DeviceTensor whose address is set once the
// copy is over; for "cpu", undefined (the key keeps its place; the result
// is placed once it exists).

// Host arrays are measured by the engine's own getters (base/views.ts): an
// own `byteLength` or `buffer` property would make the copy read past the
// array, or miss that its buffer is resizable.

/** A host Tensor: its data, dtype and shape as they are now, checked against each other. */
export function describeTensor(t: Traversal, leaf: Tensor, parent: Frame | null, key: unknown, pointerOf: PointerOf | null): unknown {
  const strides = leaf.strides;
  if (strides !== undefined) return describeStrided(t, leaf, strides, parent, key, pointerOf);
  const data = leaf.data; // read once: a getter may give another array each time
  const dtype = leaf.dtype;
  const elementSize = DTYPE_SIZE[dtype];
  let shape = leaf.shape;
  let elements: number;
  if (shape === constructedShape(leaf)) elements = constructedSize(leaf);
  else {
    shape = reassignedShape(shape, parent, key); // reassigned or forged: checked and frozen here
    elements = elementCount(shape);
  }
  const bytes = viewByteLength(data); // -1: no typed array
  if (bytes !== elements * elementSize) throw shapeMismatch(parent, key, data, shape, dtype, elements);
  t.leaves.push(leaf);
  return describeHost(t, data, bytes, dtype, elementSize, shape, parent, key, pointerOf);
}

/** A bare typed array of `dtype` (the dtype its kind stands for): a 1-D tensor. */
export function describeArray(t: Traversal, data: TypedArray, dtype: DType, parent: Frame | null, key: unknown, pointerOf: PointerOf | null): unknown {
  const bytes = viewByteLength(data);
  if (bytes < 0) throw leafError(parent, key, "it claims to be a typed array (by its constructor) but is none; a DataView is no tensor");
  t.leaves.push(data);
  return describeHost(t, data, bytes, dtype, DTYPE_SIZE[dtype], null, parent, key, pointerOf);
}

/** A host leaf of `bytes` (read by the engine's getter), bound for a device (host leaves bound for the host are reused, never listed). */
function describeHost(
  t: Traversal,
  data: TypedArray,
  bytes: number,
  dtype: DType,
  elementSize: number,
  shape: readonly number[] | null,
  parent: Frame | null,
  key: unknown,
  pointerOf: PointerOf | null,
): unknown {
  // Read for both cases: in Bun, reading it moves a small array's storage out of the moving heap.
  const buffer = viewBuffer(data);
  if (bytes === 0) checkReadable(parent, key, data, buffer);
  // A snapshot of its own: shrinking the caller's buffer while the copy runs gives its pages back at once.
  else if (isResizable(buffer)) data = viewSlice(data);
  const i = t.count++;
  t.views.push(data);
  // Pinned memory of ours (a pinned output released in flight stays out of the pool): read in place.
  const flags = t.holdPinned(buffer) ? LEAF_PINNED : 0;
  // .buffer was read just above (Bun: the view's storage is pinned)
  writeLeaf(t, i, pointerOf === null || bytes === 0 ? 0 : pointerOf(data, true), bytes, DEVICE_CPU, elementSize, flags);
  // A Tensor's copy comes back to the host as a Tensor (shape given), a bare array's as an array.
  const output = makeDeviceTensor(0, shape ?? vectorShape(bytes / elementSize), dtype, t.target, bytes, 0, 0, false, null, shape !== null);
  t.outputs!.push(output);
  return output;
}

/**
 * A strided host Tensor: the part of its data that its layout reads, and
 * that layout in bytes for mtc_plan_set_leaf_layout, checked again here
 * (fields can be reassigned after construction). It is copied dense, also
 * to "cpu".
 */
function describeStrided(t: Traversal, leaf: Tensor, strides: readonly number[], parent: Frame | null, key: unknown, pointerOf: PointerOf | null): unknown {
  const data = leaf.data;
  const released = releasedData(data, "the Tensor's");
  if (released !== undefined) throw leafError(parent, key, released);
  const dtype = leaf.dtype;
  const offset = leaf.offset;
  const elementSize = DTYPE_SIZE[dtype];
  const storageSize = storageElementBytes(data); // the engine's kind, not the array's own properties
  if (storageSize === undefined || elementSize === undefined) throw shapeMismatch(parent, key, data, leaf.shape, dtype, 0);
  let shape = leaf.shape;
  let elements: number;
  if (shape === constructedShape(leaf)) elements = constructedSize(leaf);
  else {
    shape = reassignedShape(shape, parent, key);
    elements = elementCount(shape);
  }
  const large = tooLarge(shape, dtype, elements, elementSize);
  if (large !== null) throw leafError(parent, key, large);
  const problem = layoutProblem(shape, elements, strides, offset, Math.floor(viewByteLength(data) / elementSize));
  if (problem !== null) throw leafError(parent, key, problem);
  const layout = byteLayout(shape, strides, elementSize);
  if (typeof layout === "string") throw leafError(parent, key, layout);
  const lanes = elementSize / storageSize;
  const [begin, end] = elements === 0 ? [offset, offset] : layoutSpan(shape, strides, offset);
  let view = viewSubarray(data, begin * lanes, end * lanes);
  if (isResizable(viewBuffer(view))) view = viewSlice(view);
  const bytes = elements * elementSize;
  const i = t.count++;
  t.leaves.push(leaf);
  t.views.push(view);
  // Pinned memory of ours: staged, not read in place, but busy until the copy is over all the same.
  const flags = t.holdPinned(viewBuffer(view)) ? LEAF_PINNED : 0;
  writeLeaf(t, i, pointerOf === null ? 0 : pointerOf(view), bytes, DEVICE_CPU, elementSize, flags);
  if (bytes > 0 && layout.shape.length > 0) (t.layouts ??= []).push({ index: i, shape: layout.shape, byteStrides: layout.byteStrides });
  return placeResult(t, shape, dtype, bytes, parent, key, true);
}

/** @internal A Tensor's shape field that is not the one its constructor froze: checked and frozen, or an error with what it holds. */
export function reassignedShape(shape: unknown, parent: Frame | null, key: unknown): readonly number[] {
  const checked = checkedShape(shape);
  if (checked !== undefined) return checked;
  const given = Array.isArray(shape) ? showShape(shape.slice()) : showValue(shape);
  throw leafError(parent, key, `the Tensor's shape ${given} is not an array of integers >= 0`);
}

/**
 * The result of the leaf just listed: for a device target made now (its
 * address set when the copy is over); for "cpu", where it goes and what it
 * is, kept for results.ts. `keepsTensor`: the result comes back to the host
 * as a Tensor whatever its shape.
 */
function placeResult(
  t: Traversal,
  shape: readonly number[],
  dtype: DType,
  bytes: number,
  parent: Frame | null,
  key: unknown,
  keepsTensor: boolean,
): unknown {
  if (t.outputs !== null) {
    const output = makeDeviceTensor(0, shape, dtype, t.target, bytes, 0, 0, false, null, keepsTensor);
    t.outputs.push(output);
    return output;
  }
  t.nodes.push(parent);
  t.keys.push(key);
  t.dtypes.push(dtype);
  t.shapes.push(shape);
  t.bytes.push(bytes);
  return undefined;
}

/** A DeviceTensor on another device: takes a share of its block until the copy has read it. */
export function describeDeviceTensor(t: Traversal, leaf: DeviceTensor, parent: Frame | null, key: unknown): unknown {
  const device = tensorDevice(leaf);
  const dtype = tensorDType(leaf);
  const bytes = tensorBytes(leaf);
  if (!t.sourceDevices.includes(device)) t.sourceDevices.push(device);
  const holder = holderOf(leaf);
  if (holder !== null) {
    holder.acquire(); // the source block lives until the copy has read it
    t.shares.push(holder);
  }
  const i = t.count++;
  t.leaves.push(leaf);
  t.views.push(undefined);
  writeLeaf(t, i, tensorAddress(leaf), bytes, device, DTYPE_SIZE[dtype]);
  return placeResult(t, tensorShape(leaf), dtype, bytes, parent, key, tensorKeepsTensor(leaf));
}

/**
 * Deno: fills the host leaves' addresses, eight a call, from their views
 * (a typed array is cheapest to read an address from as an FFI argument).
 * DeviceTensor entries pass as NULL: C leaves those addresses as written.
 */
export function writeAddresses(lib: MtcLibrary, t: Traversal): void {
  writeAddressesOf(lib, t.descriptors.words, t.views, t.count);
}

/** writeAddresses for any descriptor words and their views (undefined: left as written). */
export function writeAddressesOf(lib: MtcLibrary, w: Uint32Array, views: readonly (TypedArray | undefined)[], count: number): void {
  const setAddresses = lib.symbols.mtc_leaves_set_addresses!;
  const v = views as (TypedArray | null | undefined)[];
  for (let k = 0; k < count; k += 8) {
    setAddresses(w, k, Math.min(8, count - k), v[k] ?? null, v[k + 1] ?? null, v[k + 2] ?? null, v[k + 3] ?? null, v[k + 4] ?? null, v[k + 5] ?? null, v[k + 6] ?? null, v[k + 7] ?? null);
  }
}

/** An error about the leaf at (parent, key). */
function leafError(parent: Frame | null, key: unknown, message: string): Error {
  return invalidArgument(message, formatPath(parent, key));
}

/**
 * Throws for an array that only looks empty: released memory of the
 * library's, detached, or a fixed-length view that its resizable
 * ArrayBuffer shrank past (it reads as length 0).
 */
export function checkReadable(parent: Frame | null, key: unknown, data: TypedArray, buffer: ArrayBufferLike): void {
  const released = releasedData(data, "its");
  if (released !== undefined) throw leafError(parent, key, released);
  if ((buffer as ArrayBuffer & { detached?: boolean }).detached === true) {
    throw leafError(parent, key, "its ArrayBuffer was detached (transferred or resized away); a detached array cannot be copied");
  }
  try {
    (data as Uint8Array).at(0); // throws only when the view is out of bounds
  } catch {
    throw leafError(
      parent,
      key,
      `it is out of bounds of its resizable ArrayBuffer, shrunk to ${buffer.byteLength} bytes after the view was made; ` +
        "an out-of-bounds array cannot be copied",
    );
  }
}

/** @internal The error for a Tensor whose data does not hold what its shape and dtype say, saying what is wrong. */
export function shapeMismatch(parent: Frame | null, key: unknown, data: TypedArray, shape: readonly number[], dtype: DType, elements: number): Error {
  if (viewByteLength(data) < 0) return leafError(parent, key, `the Tensor's data is not a typed array`);
  const released = releasedData(data, "the Tensor's");
  if (released !== undefined) return leafError(parent, key, released);
  const kind = data.constructor.name;
  if (!isDType(dtype)) return leafError(parent, key, `the Tensor's dtype ${showValue(dtype)} is not one of the dtypes`);
  const values = valuesPerElement(dtype); // 2 for complex: real, imaginary
  if (data.length % values !== 0) {
    return leafError(parent, key, `the Tensor's ${kind} has an odd length, ${data.length}, but a ${dtype} element is ${values} values (real, imaginary)`);
  }
  if (data.length === elements * values) {
    return leafError(parent, key, `the Tensor's ${kind} holds ${data.byteLength} bytes but ${elements} elements of ${dtype} take ${elements * DTYPE_SIZE[dtype]}`);
  }
  return leafError(
    parent,
    key,
    `the Tensor's ${kind} has ${data.length / values} elements but its shape ${showShape(shape)} needs ${elements} ` +
      "(was its buffer detached or resized?)",
  );
}
