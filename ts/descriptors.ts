/**
 * Leaf descriptors: one `mtc_leaf` (40 bytes) per listed leaf, written into
 * one reusable buffer that `mtc_plan_add_leaves` copies in a single call.
 *
 * @module
 */

import type { BlockHolder } from "./block.ts";
import { DEVICE_CPU } from "./device.ts";
import { DeviceTensor, holderOf } from "./device_tensor.ts";
import { DTYPE_SIZE, type TypedArray } from "./dtype.ts";
import { invalidArgument } from "./errors.ts";
import type { MtcLibrary } from "./ffi/library.ts";
import { Tensor } from "./tensor.ts";
import { leafPath, type Traversal } from "./traverse.ts";

/** sizeof(mtc_leaf). */
export const LEAF_BYTES = 40;
const LEAF_WORDS = LEAF_BYTES / 4;
const TWO_32 = 4294967296;

/** The descriptors of the copy being started (C copies them in mtc_plan_add_leaves). */
export let leafWords: Uint32Array = new Uint32Array(64 * LEAF_WORDS);
/** CUDA devices of the DeviceTensor sources of the copy being started (distinct, in order of appearance). */
export const sourceDevices: number[] = [];
/** Host views whose addresses are still to be written (Deno: eight per FFI call). */
let pending: (TypedArray | null)[] = [];

function capacityFor(count: number): number {
  let n = 64;
  while (n < count) n *= 2;
  return n;
}

function isDetached(data: TypedArray): boolean {
  return (data.buffer as ArrayBuffer & { detached?: boolean }).detached === true;
}

/** An error about leaf i; first drops the views gathered so far, so a failed copy keeps no input alive. */
function leafError(t: Traversal, i: number, message: string): Error {
  pending.fill(null, 0, i);
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
 * Writes leaf i's mtc_leaf for every listed leaf; takes a block share for
 * each DeviceTensor source (pushed to `shares`), and lists the source
 * devices in `sourceDevices`. Throws MtcError with the leaf's path for a
 * detached buffer, a view out of bounds of its shrunk resizable buffer, and
 * a Tensor whose data does not fill its shape.
 */
export function writeLeaves(lib: MtcLibrary, t: Traversal, shares: BlockHolder[]): void {
  const count = t.leaves.length;
  if (leafWords.length < count * LEAF_WORDS) leafWords = new Uint32Array(capacityFor(count) * LEAF_WORDS);
  const w = leafWords;
  // Deno reads a typed array's address cheapest as an FFI argument: gather
  // the views and let C fill eight descriptors a call. Bun's ptr() is cheap.
  const setAddresses = lib.backend.runtime === "deno" ? lib.symbols.mtc_leaves_set_addresses : undefined;
  const pointerOf = lib.backend.pointerOf;
  if (setAddresses !== undefined && pending.length < count) pending = new Array(capacityFor(count)).fill(null);
  sourceDevices.length = 0;
  let lastDevice = DEVICE_CPU;
  for (let i = 0; i < count; i++) {
    const leaf = t.leaves[i]!;
    const at = i * LEAF_WORDS;
    let address = 0;
    let bytes: number;
    let device = DEVICE_CPU;
    let elementSize: number;
    if (leaf instanceof DeviceTensor) {
      address = leaf.address;
      bytes = leaf.byteLength;
      device = leaf.deviceIndex;
      if (device !== lastDevice) {
        lastDevice = device;
        if (!sourceDevices.includes(device)) sourceDevices.push(device);
      }
      elementSize = DTYPE_SIZE[leaf.dtype];
      const holder = holderOf(leaf);
      if (holder !== null) {
        holder.acquire(); // the source block lives until the copy has read it
        shares.push(holder);
      }
      // pending[i] stays null: between calls every entry is null.
    } else {
      let data: TypedArray;
      if (leaf instanceof Tensor) {
        data = leaf.data;
        elementSize = DTYPE_SIZE[leaf.dtype];
        if (data.length !== leaf.size) throw shapeMismatch(t, i, leaf);
      } else {
        data = leaf;
        elementSize = (data as Uint8Array).BYTES_PER_ELEMENT;
      }
      bytes = data.byteLength;
      if (bytes === 0) checkReadable(t, i, data);
      if (setAddresses !== undefined) pending[i] = data;
      else address = pointerOf(data);
    }
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
    const p = pending;
    for (let i = 0; i < count; i += 8) {
      setAddresses(w, i, Math.min(8, count - i), p[i], p[i + 1], p[i + 2], p[i + 3], p[i + 4], p[i + 5], p[i + 6], p[i + 7]);
    }
    p.fill(null, 0, count); // drop the references: the handle holds the leaves
  }
}

function shapeMismatch(t: Traversal, i: number, leaf: Tensor): Error {
  return leafError(
    t,
    i,
    `the Tensor's ${leaf.data.constructor.name} has ${leaf.data.length} elements but its shape [${leaf.shape.join(", ")}] needs ` +
      `${leaf.size} (was its buffer detached or resized?)`,
  );
}
