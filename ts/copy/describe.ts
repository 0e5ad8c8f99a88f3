/**
 * Leaf descriptors: one `mtc_leaf` (40 bytes) per listed leaf, written into
 * one reusable buffer that `mtc_plan_add_leaves` copies in a single call.
 *
 * @module
 */

import type { BlockHolder } from "../gpu/block.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { constructedDeviceShape, DeviceTensor, holderOf } from "../tensor/device_tensor.ts";
import { type DType, DTYPE_SIZE, dtypeOf, isDType, type TypedArray } from "../tensor/dtype.ts";
import { invalidArgument } from "../base/errors.ts";
import type { MtcLibrary } from "../ffi/library.ts";
import { checkedShape, elementCount } from "../tensor/shape.ts";
import { constructedShape, constructedSize, Tensor } from "../tensor/tensor.ts";
import { leafPath, type Traversal } from "./walk.ts";

/** sizeof(mtc_leaf). */
export const LEAF_BYTES = 40;
const LEAF_WORDS = LEAF_BYTES / 4;
const TWO_32 = 4294967296;

/**
 * The buffers one startCopy writes its descriptors into. They are reused
 * from copy to copy; a copy started while another one is writing (from a
 * getter on one of its leaves) gets buffers of its own.
 */
export interface Descriptors {
  /** One mtc_leaf per listed leaf; C copies them in mtc_plan_add_leaves. */
  words: Uint32Array;
  /** CUDA devices of the DeviceTensor sources (distinct, in order of appearance). */
  readonly sourceDevices: number[];
}

function freshDescriptors(): Descriptors {
  return { words: new Uint32Array(64 * LEAF_WORDS), sourceDevices: [] };
}

let spare: Descriptors | null = freshDescriptors();

/** The reusable descriptor buffers, or fresh ones while they are in use. Give them back with {@link releaseDescriptors}. */
export function takeDescriptors(): Descriptors {
  const d = spare ?? freshDescriptors();
  spare = null;
  return d;
}

/** Gives descriptor buffers back for the next copy. */
export function releaseDescriptors(d: Descriptors): void {
  spare = d;
}

function capacityFor(count: number): number {
  let n = 64;
  while (n < count) n *= 2;
  return n;
}

function isDetached(data: TypedArray): boolean {
  return (data.buffer as ArrayBuffer & { detached?: boolean }).detached === true;
}

/** An error about leaf i. */
function leafError(t: Traversal, i: number, message: string): Error {
  return invalidArgument(message, leafPath(t, i));
}

/**
 * Throws for an array that only looks empty: detached, or a fixed-length
 * view that its resizable ArrayBuffer shrank past (it reads as length 0).
 */
function checkReadable(t: Traversal, i: number, data: TypedArray): void {
  if (isDetached(data)) {
    throw leafError(t, i, "its ArrayBuffer was detached (transferred or resized away); a detached array cannot be copied");
  }
  try {
    (data as Uint8Array).at(0); // throws only when the view is out of bounds
  } catch {
    throw leafError(
      t,
      i,
      `it is out of bounds of its resizable ArrayBuffer, shrunk to ${data.buffer.byteLength} bytes after the view was made; ` +
        "an out-of-bounds array cannot be copied",
    );
  }
}

/**
 * A copy of a view on a resizable ArrayBuffer, on a fixed-length buffer of
 * its own: the copy reads that instead, so resizing or transferring the
 * caller's buffer while the copy runs cannot pull memory from under it
 * (shrinking a resizable buffer gives its pages back at once).
 */
function snapshot(data: TypedArray): TypedArray {
  return (data as Uint8Array).slice() as unknown as TypedArray;
}

/**
 * Writes leaf i's mtc_leaf into `d.words` for every listed leaf, and fixes
 * what the copy reads and what its results will say (`t.views`, `t.dtypes`,
 * `t.shapes`, `t.bytes`): every leaf is read once, here. Takes a block share
 * for each DeviceTensor source (pushed to `shares`) and lists the source
 * devices in `d.sourceDevices`. A view on a resizable buffer is read from a
 * snapshot. Throws MtcError with the leaf's path for a detached buffer, a
 * view out of bounds of its shrunk resizable buffer, and a Tensor whose data
 * does not fill its shape.
 */
export function writeLeaves(lib: MtcLibrary, t: Traversal, shares: BlockHolder[], d: Descriptors): void {
  const count = t.leaves.length;
  if (d.words.length < count * LEAF_WORDS) d.words = new Uint32Array(capacityFor(count) * LEAF_WORDS);
  const w = d.words;
  const sourceDevices = d.sourceDevices;
  sourceDevices.length = 0;
  // Filled by index: cheaper than push in both engines.
  const views = (t.views = new Array(count));
  const dtypes = (t.dtypes = new Array(count));
  const shapes = (t.shapes = new Array(count));
  const sizes = (t.bytes = new Array(count));
  // Deno reads a typed array's address cheapest as an FFI argument: C fills
  // eight descriptors a call from the views. Bun's ptr() is cheap.
  const setAddresses = lib.backend.runtime === "deno" ? lib.symbols.mtc_leaves_set_addresses : undefined;
  const pointerOf = lib.backend.pointerOf;
  let lastDevice = DEVICE_CPU;
  for (let i = 0; i < count; i++) {
    const leaf = t.leaves[i]!;
    const at = i * LEAF_WORDS;
    let address = 0;
    let bytes: number;
    let device = DEVICE_CPU;
    let dtype: DType;
    let elementSize: number;
    let shape: readonly number[] | null;
    if (leaf instanceof DeviceTensor) {
      address = leaf.address;
      bytes = leaf.byteLength;
      device = leaf.deviceIndex;
      dtype = leaf.dtype;
      elementSize = DTYPE_SIZE[dtype];
      shape = leaf.shape;
      if (shape !== constructedDeviceShape(leaf)) shape = checkedShape(shape) ?? constructedDeviceShape(leaf);
      if (device !== lastDevice) {
        lastDevice = device;
        if (!sourceDevices.includes(device)) sourceDevices.push(device);
      }
      const holder = holderOf(leaf);
      if (holder !== null) {
        holder.acquire(); // the source block lives until the copy has read it
        shares.push(holder);
      }
    } else {
      let data: TypedArray;
      if (leaf instanceof Tensor) {
        data = leaf.data; // read once: a getter may give another array each time
        dtype = leaf.dtype;
        elementSize = DTYPE_SIZE[dtype];
        shape = leaf.shape;
        let elements: number;
        if (shape === constructedShape(leaf)) elements = constructedSize(leaf);
        else {
          const checked = checkedShape(shape); // reassigned or forged: checked and frozen here
          if (checked === undefined) throw leafError(t, i, `the Tensor's shape is not an array of integers >= 0`);
          shape = checked;
          elements = elementCount(checked);
        }
        if (data?.byteLength !== elements * elementSize || !ArrayBuffer.isView(data)) {
          throw shapeMismatch(t, i, data, shape, dtype, elements);
        }
      } else {
        data = leaf;
        dtype = dtypeOf(data);
        elementSize = (data as Uint8Array).BYTES_PER_ELEMENT;
        shape = null; // [length], made when the result is
      }
      bytes = data.byteLength;
      if (bytes === 0) checkReadable(t, i, data);
      else if ((data.buffer as ArrayBuffer & { resizable?: boolean }).resizable === true) data = snapshot(data);
      views[i] = data;
      if (setAddresses === undefined) address = pointerOf(data, true); // .buffer was read just above
    }
    dtypes[i] = dtype;
    shapes[i] = shape;
    sizes[i] = bytes;
    w[at] = address >>> 0; // address
    w[at + 1] = (address / TWO_32) >>> 0;
    w[at + 2] = bytes >>> 0; // bytes
    w[at + 3] = (bytes / TWO_32) >>> 0;
    w[at + 4] = 0; // row_pitch
    w[at + 5] = 0;
    w[at + 6] = device >>> 0; // device (int32)
    w[at + 7] = elementSize; // element_size
    w[at + 8] = 0; // row_count: contiguous
    w[at + 9] = 0; // flags
  }
  if (setAddresses !== undefined) {
    const v = views as (TypedArray | null)[]; // unset entries (DeviceTensors) pass as NULL: C leaves those addresses
    for (let k = 0; k < count; k += 8) {
      setAddresses(w, k, Math.min(8, count - k), v[k] ?? null, v[k + 1] ?? null, v[k + 2] ?? null, v[k + 3] ?? null, v[k + 4] ?? null, v[k + 5] ?? null, v[k + 6] ?? null, v[k + 7] ?? null);
    }
  }
}

function shapeMismatch(t: Traversal, i: number, data: TypedArray, shape: readonly number[], dtype: DType, elements: number): Error {
  if (!ArrayBuffer.isView(data)) return leafError(t, i, `the Tensor's data is not a typed array`);
  const kind = data.constructor.name;
  if (!isDType(dtype)) return leafError(t, i, `the Tensor's dtype ${JSON.stringify(dtype)} is not one of the dtypes`);
  if (data.length === elements) {
    return leafError(t, i, `the Tensor's ${kind} holds ${data.byteLength} bytes but ${elements} elements of ${dtype} take ${elements * DTYPE_SIZE[dtype]}`);
  }
  return leafError(
    t,
    i,
    `the Tensor's ${kind} has ${data.length} elements but its shape [${shape.join(", ")}] needs ${elements} ` +
      "(was its buffer detached or resized?)",
  );
}
