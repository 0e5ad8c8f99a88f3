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
import { type DType, DTYPE_SIZE, storageFits, type TypedArray } from "../tensor/dtype.ts";
import { isResizable, viewBuffer, viewByteLength, viewKind } from "../base/views.ts";
import { vectorShape } from "../tensor/shape.ts";
import { constructedShape, constructedSize, type Tensor } from "../tensor/tensor.ts";
import { arrayRecord, checkArray, checkDense, checkStrided, type LeafRecord, readTensor, snapshot, stridedView, tensorRecord } from "./leaf_record.ts";
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
//
// A host leaf's fields are read once; the checks run on what was read
// (leaf_record.ts), never on the leaf again. The common leaf, a Tensor with
// the shape its constructor froze and data that holds it (or a typed array
// with bytes), passes them all by one comparison and goes on with the
// values read; any other is made into its record and checked in full. Host
// arrays are measured by the engine's own getters (base/views.ts): an own
// `byteLength` or `buffer` property would make the copy read past the
// array, or miss that its buffer is resizable.

/** A host Tensor bound for a device, or a strided one bound anywhere; `strides` as the walk read them. */
export function describeTensor(t: Traversal, leaf: Tensor, strides: unknown, parent: Frame | null, key: unknown, pointerOf: PointerOf | null): unknown {
  if (strides !== undefined) return describeStrided(t, leaf, readTensor(leaf, strides), parent, key, pointerOf);
  const data = leaf.data; // a getter may give another array each time
  const dtype = leaf.dtype;
  const shape = leaf.shape;
  const offset = leaf.offset;
  const elementSize = DTYPE_SIZE[dtype];
  const bytes = viewByteLength(data); // -1: no typed array
  let buffer: ArrayBufferLike;
  let checked = shape;
  // The shape its constructor froze, and data that holds it: every check of checkDense passes.
  if (shape === constructedShape(leaf) && bytes === constructedSize(leaf) * elementSize && bytes > 0 && offset === 0 && storageFits(dtype, viewKind(data)!)) {
    buffer = viewBuffer(data);
  } else {
    const r = tensorRecord(leaf, data, dtype, shape, undefined, offset);
    checkDense(r, parent, key);
    buffer = r.buffer!;
    checked = r.shape!;
  }
  t.leaves.push(leaf);
  return describeHost(t, data, bytes, buffer, dtype, elementSize, checked, true, pointerOf);
}

/** A bare typed array of `dtype` (the dtype its kind stands for) bound for a device: a 1-D tensor. */
export function describeArray(t: Traversal, data: TypedArray, dtype: DType, parent: Frame | null, key: unknown, pointerOf: PointerOf | null): unknown {
  const bytes = viewByteLength(data); // -1: no typed array
  if (bytes <= 0) checkArray(arrayRecord(data, dtype, bytes), parent, key);
  const elementSize = DTYPE_SIZE[dtype];
  t.leaves.push(data);
  return describeHost(t, data, bytes, viewBuffer(data), dtype, elementSize, vectorShape(bytes / elementSize), false, pointerOf);
}

/**
 * A dense host leaf, checked, bound for a device (host leaves bound for
 * the host are reused, never listed): `bytes` and `buffer` by the engine's
 * getters. `isTensor`: its copy comes back to the host as a Tensor
 * (whatever its shape), not as a bare array.
 */
function describeHost(
  t: Traversal,
  data: TypedArray,
  bytes: number,
  buffer: ArrayBufferLike,
  dtype: DType,
  elementSize: number,
  shape: readonly number[],
  isTensor: boolean,
  pointerOf: PointerOf | null,
): unknown {
  // A snapshot of its own: shrinking the caller's buffer while the copy runs gives its pages back at once.
  const view = bytes > 0 && isResizable(buffer) ? snapshot(data) : data;
  const i = t.count++;
  t.views.push(view);
  // Pinned memory of ours (a pinned output released in flight stays out of the pool): read in place.
  const flags = t.holdPinned(buffer) ? LEAF_PINNED : 0;
  writeLeaf(t, i, pointerOf === null || bytes === 0 ? 0 : pointerOf(view, true), bytes, DEVICE_CPU, elementSize, flags);
  const output = makeDeviceTensor(0, shape, dtype, t.target, bytes, 0, 0, false, null, isTensor);
  t.outputs!.push(output);
  return output;
}

/**
 * A strided host Tensor: the part of its data that its layout reads, and
 * that layout in bytes for mtc_plan_set_leaf_layout, checked again here
 * (fields can be reassigned after construction). It is copied dense, also
 * to "cpu".
 */
function describeStrided(t: Traversal, leaf: Tensor, r: LeafRecord, parent: Frame | null, key: unknown, pointerOf: PointerOf | null): unknown {
  checkStrided(r, parent, key);
  const { view, bytes, layout } = stridedView(r, parent, key);
  const i = t.count++;
  t.leaves.push(leaf);
  t.views.push(view);
  // Pinned memory of ours: staged, not read in place, but busy until the copy is over all the same.
  const flags = t.holdPinned(r.buffer!) ? LEAF_PINNED : 0;
  writeLeaf(t, i, pointerOf === null ? 0 : pointerOf(view), bytes, DEVICE_CPU, r.elementSize, flags);
  if (bytes > 0 && layout !== undefined) (t.layouts ??= []).push({ index: i, shape: layout.shape, byteStrides: layout.byteStrides });
  return placeResult(t, r.shape!, r.dtype, bytes, parent, key, true);
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
 * Fills the host leaves' addresses, eight a call, from their views (a
 * typed array is cheapest to read an address from as an FFI argument).
 * DeviceTensor entries pass as NULL: C leaves those addresses as written,
 * and eight of them in a row need no call.
 */
export function writeAddresses(lib: MtcLibrary, t: Traversal): void {
  writeAddressesOf(lib, t.descriptors.words, t.views, t.count);
}

/** writeAddresses for any descriptor words and their views (undefined: left as written). */
export function writeAddressesOf(lib: MtcLibrary, w: Uint32Array, views: readonly (TypedArray | undefined)[], count: number): void {
  const setAddresses = lib.symbols.mtc_leaves_set_addresses!;
  const v = views as (TypedArray | null | undefined)[];
  for (let k = 0; k < count; k += 8) {
    if (!hostViewAmong(v, k, Math.min(k + 8, count))) continue;
    setAddresses(w, k, Math.min(8, count - k), v[k] ?? null, v[k + 1] ?? null, v[k + 2] ?? null, v[k + 3] ?? null, v[k + 4] ?? null, v[k + 5] ?? null, v[k + 6] ?? null, v[k + 7] ?? null);
  }
}

/** True when one of views[from, to) is a host view (a DeviceTensor leaf has none). */
function hostViewAmong(views: readonly (TypedArray | null | undefined)[], from: number, to: number): boolean {
  for (let k = from; k < to; k++) if (views[k] !== undefined) return true;
  return false;
}
