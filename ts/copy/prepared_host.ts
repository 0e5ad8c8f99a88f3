/**
 * The host leaves of a batch read against a prepared copy's template
 * (prepared_check.ts): the second pass, where no user code runs, writes
 * each one's address and pinned flag into the copy's descriptors. A leaf in
 * pinned memory of the library's (an arena's batch, a pinned tensor) gets
 * its buffer's address, read once a buffer, plus its offset; an array the
 * last batch had at the same place keeps its address (the leaf cache); the
 * rest are read in bulk once the batch is read (prepared_plan.ts).
 *
 * @module
 */

import { invalidArgument, invalidState } from "../base/errors.ts";
import { isDetached, isResizable, viewBuffer, viewByteOffset, viewSlice } from "../base/views.ts";
import type { DeviceTensor } from "../tensor/device_tensor.ts";
import type { TypedArray } from "../tensor/dtype.ts";
import { releasedData } from "../tensor/tensor.ts";
import { LEAF_BYTES, LEAF_PINNED, type PointerOf } from "./describe.ts";
import type { LeafNode } from "./prepared_template.ts";
import type { Traversal } from "./traversal.ts";

const LEAF_WORDS = LEAF_BYTES / 4;
const TWO_32 = 4294967296;
/** BatchRead.lastBase before a pinned buffer's first leaf, and after it. */
const NO_BASE = -1;
const ONE_LEAF = -2;

/**
 * What a prepared copy remembers of each host leaf from one batch to the
 * next: the array last read there and its address, entered only once that
 * address was read. The same array again (by identity), with the byte
 * length the check has just read, is the same fixed-length buffer: its
 * storage, address and pinned state have not changed (a detached buffer
 * reads as 0 bytes), so its buffer and address are not read again.
 */
export interface LeafCache {
  readonly views: (TypedArray | undefined)[];
  readonly buffers: (ArrayBufferLike | undefined)[];
  readonly addresses: Float64Array;
  readonly pinned: Uint8Array;
}

export function newLeafCache(count: number): LeafCache {
  return { views: new Array(count), buffers: new Array(count), addresses: new Float64Array(count), pinned: new Uint8Array(count) };
}

/** One batch being read: where its descriptors and leaf places go. */
export interface BatchRead {
  readonly t: Traversal;
  /** The descriptors, the template's with this batch's addresses and pinned flags. */
  readonly words: Uint32Array;
  /** Leaf i's output container (null: the root). */
  readonly places: (object | null)[];
  readonly pointerOf: PointerOf | null;
  /** Reads the address of a pinned buffer's first leaf (whatever pointerOf is). */
  readonly basePointerOf: PointerOf;
  readonly target: number;
  /** Leaves whose pinned flag differs from the sample's. */
  flagsChanged: number;
  /**
   * The buffer of the host leaf read last, and what is known of it:
   * resizable, pinned, the address of its byte 0 (NO_BASE: its first leaf
   * has its address read as any other's; ONE_LEAF: that was done once).
   */
  lastBuffer: ArrayBufferLike | null;
  lastResizable: boolean;
  lastPinned: boolean;
  lastBase: number;
  readonly cache: LeafCache | null;
  /** Leaf i's view whose address is still to be read in bulk (undefined: known, or none). */
  readonly bulk: (TypedArray | undefined)[];
  /** The leaves read anew, and the arrays read there: entered into the cache once their addresses are known. */
  readonly misses: number[];
  readonly missViews: TypedArray[];
  /** DeviceTensors placed as they are, and their paths: checked again once the batch was read. */
  readonly placed: DeviceTensor[];
  readonly placedPaths: string[];
}

/** A read of one batch of `count` leaves into `words`, for a copy to `target`. */
export function newBatchRead(
  t: Traversal,
  words: Uint32Array,
  count: number,
  pointerOf: PointerOf | null,
  basePointerOf: PointerOf,
  target: number,
  cache: LeafCache | null,
): BatchRead {
  return {
    t, words, places: new Array(count), pointerOf, basePointerOf, target, flagsChanged: 0,
    lastBuffer: null, lastResizable: false, lastPinned: false, lastBase: NO_BASE, cache, bulk: new Array(count), misses: [], missViews: [], placed: [], placedPaths: [],
  };
}

/** Once every address is in the descriptors: the arrays read anew enter the cache. */
export function commitCache(r: BatchRead): void {
  const c = r.cache;
  if (c === null) return;
  for (let k = 0; k < r.misses.length; k++) {
    const i = r.misses[k]!;
    const at = i * LEAF_WORDS;
    c.addresses[i] = r.words[at]! + r.words[at + 1]! * TWO_32;
    c.views[i] = r.missViews[k];
  }
}

/** The error for a batch that differs from the sample at `path`. */
export function differs(path: string, why: string): Error {
  return invalidArgument(`the batch differs from the prepared copy's sample: ${why}; nothing was copied`, path);
}

/**
 * Writes host leaf i's descriptor: its address, or its view for the bulk
 * read, and the pinned flag. A leaf in pinned memory of the library's (an
 * arena's batch, a pinned tensor) lies at a fixed address: its buffer's,
 * read at its second leaf, plus its offset, with no call to C a leaf (a
 * buffer of one leaf costs no more than before: a pointer read alone is
 * slower than one in bulk in Deno).
 */
export function hostLeaf(node: LeafNode, data: TypedArray, r: BatchRead, sampleFlags: Uint8Array | null): void {
  const i = node.index;
  const c = r.cache;
  const cached = c === null ? undefined : c.views[i];
  if (cached === data && node.bytes > 0) return knownLeaf(i, data, r, c!, sampleFlags);
  const buffer = viewBuffer(data); // reading it keeps a small array's storage where it is (Bun, V8)
  if (buffer !== r.lastBuffer) enterBuffer(r, buffer);
  if (r.lastPinned && !r.lastResizable && node.bytes > 0 && r.lastBase !== NO_BASE) {
    if (cached !== undefined) c!.views[i] = undefined; // this slot's array changed: the cached one no longer is its
    if (r.lastBase === ONE_LEAF) r.lastBase = r.basePointerOf(data, true) - viewByteOffset(data);
    return writeHost(i, r.lastBase + viewByteOffset(data), LEAF_PINNED, r, sampleFlags);
  }
  if (r.lastPinned && node.bytes > 0) r.lastBase = ONE_LEAF;
  const read = data;
  const resizable = node.bytes > 0 && r.lastResizable;
  if (node.bytes === 0) checkReadable(node, data, buffer);
  else if (resizable) data = viewSlice(data); // a snapshot: the caller may shrink its buffer meanwhile
  r.t.views[i] = data;
  const flag = r.lastPinned ? LEAF_PINNED : 0;
  const address = r.pointerOf === null || node.bytes === 0 ? 0 : r.pointerOf(data, true);
  if (r.pointerOf === null && node.bytes > 0) r.bulk[i] = data;
  if (c !== null) {
    c.views[i] = undefined; // until its address is read
    if (!resizable && node.bytes > 0) {
      c.buffers[i] = buffer;
      c.pinned[i] = flag;
      r.misses.push(i);
      r.missViews.push(read);
    }
  }
  writeHost(i, address, flag, r, sampleFlags);
}

/** What hostLeaf keeps of the buffer its leaves now come from (leaves of one buffer come in runs). */
function enterBuffer(r: BatchRead, buffer: ArrayBufferLike): void {
  r.lastBuffer = buffer;
  r.lastResizable = isResizable(buffer);
  r.lastPinned = r.t.holdPinned(buffer); // pinned memory of the library's: held, and busy until the copy is over
  r.lastBase = NO_BASE;
}

/** A host leaf that is the array the last batch had here: its address and buffer as they were. */
function knownLeaf(i: number, data: TypedArray, r: BatchRead, c: LeafCache, sampleFlags: Uint8Array | null): void {
  r.t.views[i] = data;
  const flag = c.pinned[i] !== 0 && r.t.holdPinned(c.buffers[i]!) ? LEAF_PINNED : 0;
  writeHost(i, c.addresses[i]!, flag, r, sampleFlags);
}

function writeHost(i: number, address: number, flag: number, r: BatchRead, sampleFlags: Uint8Array | null): void {
  const w = r.words;
  const at = i * LEAF_WORDS;
  w[at] = address >>> 0;
  w[at + 1] = (address / TWO_32) >>> 0;
  w[at + 9] = flag;
  if (sampleFlags !== null && sampleFlags[i] !== flag) r.flagsChanged++;
}

function checkReadable(node: LeafNode, data: TypedArray, buffer: ArrayBufferLike): void {
  const released = releasedData(data, "its");
  if (released !== undefined) throw invalidState(`${released}; nothing was copied`, node.path);
  if (buffer instanceof ArrayBuffer && isDetached(buffer)) throw differs(node.path, "its ArrayBuffer was detached");
}
