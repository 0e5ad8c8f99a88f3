/**
 * The walk of a copy into existing memory (copyInto): the source and the
 * destination side by side, once. Every tensor leaf of the source must meet
 * a leaf of the same dtype and shape at the same place in the destination,
 * on the device of every other destination; each pair becomes two
 * `mtc_leaf` descriptors (the source and where it goes). Everything is
 * checked here, with the leaf's path, before anything is copied: a missing,
 * mismatched, disposed or overlapping destination is an MtcError.
 *
 * @module
 */

import { isResizable, viewBuffer, viewByteLength, viewByteOffset } from "../base/views.ts";
import { otherCopyError, otherCopyMark } from "../base/copy_identity.ts";
import { invalidArgument, mapEntries, type MtcError } from "../base/errors.ts";
import { DEVICE_CPU, deviceName } from "../gpu/device.ts";
import { DTYPE_SIZE, type TypedArray } from "../tensor/dtype.ts";
import { LEAF_PINNED, type PointerOf, putLeaf } from "./describe.ts";
import { overlaps, readSide, type Side, share, spaceOf } from "./into_side.ts";
import { ARRAY, formatPath, type Kind, MAP, OBJECT, type PathNode } from "./path.ts";
import { checkNumberArray, checkPassThrough, checkTensorLookAlike } from "./strict.ts";
import { Traversal } from "./traversal.ts";

const LEAF_WORDS = 10; // sizeof(mtc_leaf) / 4
const TWO_32 = 4294967296;

/** What the walk of a copyInto gives: the traversal (sources, paths, held objects) and the destination descriptors. */
export interface IntoWalk {
  readonly t: Traversal;
  /** One mtc_leaf per listed leaf: where it goes. */
  destinationWords: Uint32Array;
  /** The host views written (undefined for device destinations), for addresses in bulk. */
  readonly destinationViews: (TypedArray | undefined)[];
  /** The target: the device of every destination (-1: host). */
  readonly target: number;
  /** Each destination's mtc_block (a DeviceTensor of libmtc's), or 0 (host memory, DLPack imports). */
  readonly destinationBlocks: number[];
}

function where(device: number): string {
  return device === DEVICE_CPU ? "host memory" : deviceName(device);
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a === b || a.length === b.length && a.every((n, k) => n === b[k]);
}

/** A byte range one leaf pair touches, for the overlap checks. */
interface Range {
  /** The ArrayBuffer (host) or the device number (device memory). */
  readonly space: unknown;
  readonly begin: number;
  readonly end: number;
  readonly leaf: number;
}

/** The destination descriptors of the last copyInto, for the next (null while in use). */
let spareDestinationWords: Uint32Array | null = null;

function takeDestinationWords(): Uint32Array {
  const words = spareDestinationWords ?? new Uint32Array(64 * LEAF_WORDS);
  spareDestinationWords = null;
  return words;
}

/** Gives the destination descriptors back once the C library has copied them (mtc_plan_add_leaves_into). */
export function releaseDestinationWords(words: Uint32Array): void {
  spareDestinationWords = words;
}

/**
 * Walks `source` and `destination` together. `pointerOf` reads host
 * addresses now (Bun); null leaves them for a bulk write at submit (Deno).
 * `strict`: the option, for the source's look-alike tensors.
 */
export function walkInto(
  source: unknown,
  destination: unknown,
  descriptors: { words: Uint32Array },
  pointerOf: PointerOf | null,
  strict = false,
): IntoWalk {
  const w = new PairWalk(descriptors, pointerOf);
  w.t.strict = strict; // the option strict, for the source (strict.ts)
  w.t.root[0] = destination;
  try {
    w.visit(source, destination, null, undefined);
    // Destinations met in address order, each in the space of the one before
    // (the results of one copy, reused), cannot overlap: no list, no sort.
    if (!w.inOrder) checkOverlaps(w.t, destinationRanges(w));
  } catch (e) {
    w.t.dropShares();
    throw e;
  }
  return { t: w.t, destinationWords: w.destinationWords, destinationViews: w.destinationViews, target: w.target ?? DEVICE_CPU, destinationBlocks: w.destinationBlocks };
}

/** The state of one walk; a class, so that the engines compile its methods once. */
class PairWalk {
  readonly t: Traversal;
  readonly nodes: (PathNode | null)[] = [];
  destinationWords: Uint32Array = takeDestinationWords();
  readonly destinationViews: (TypedArray | undefined)[] = [];
  readonly destinationBlocks: number[] = [];
  target: number | undefined = undefined;
  /** Whether every destination so far began at or after the end of the one before, in its space. */
  inOrder = true;
  lastSpace: unknown = undefined;
  lastEnd = 0;
  /** The containers from the root to here, checked for cycles (a scan: batches are shallow). */
  readonly onPath: object[] = [];

  constructor(descriptors: { words: Uint32Array }, readonly pointerOf: PointerOf | null) {
    this.t = new Traversal(DEVICE_CPU, descriptors);
    this.t.intoNodes = this.nodes;
  }

  visit(s: unknown, d: unknown, node: PathNode | null, key: unknown): void {
    if (typeof s !== "object" || s === null) return; // not a tensor: ignored
    const src = readSide(s, node, key, "source");
    if (src !== undefined) return this.leaf(src, s, d, node, key);
    const kind = containerKind(s);
    if (kind === undefined) {
      const other = otherCopyMark(s);
      if (other !== undefined) throw otherCopyError(other, formatPath(node, key), "the source is ");
      if (this.t.strict) checkPassThrough(s, formatPath(node, key));
      return; // class instances, Sets, ...: ignored
    }
    if (this.onPath.includes(s)) throw invalidArgument("cycle: this container contains itself", formatPath(node, key));
    if (containerKind(d) !== kind) {
      throw invalidArgument(`the destination has ${d === undefined ? "nothing" : `a ${typeName(d)}`} where the source has ${KIND_NAMES[kind]}`, formatPath(node, key));
    }
    this.onPath.push(s);
    const here: PathNode = { parent: node, key, kind };
    if (this.t.strict && kind !== MAP) this.visitStrict(s, d, kind, here, formatPath(node, key), key);
    else if (kind === ARRAY) {
      const a = s as unknown[];
      const b = d as unknown[];
      for (let k = 0; k < a.length; k++) this.visit(a[k], b[k], here, k);
    } else if (kind === MAP) {
      const b = d as Map<unknown, unknown>;
      for (const [k, v] of mapEntries(s as Map<unknown, unknown>, formatPath(node, key))) this.visit(v, b.get(k), here, k);
    } else {
      const a = s as Record<string, unknown>;
      const b = d as Record<string, unknown>;
      const keys = Object.keys(a);
      for (let k = 0; k < keys.length; k++) this.visit(a[keys[k]!], b[keys[k]!], here, keys[k]);
    }
    this.onPath.pop();
  }

  /** The option strict: an array or plain object's values read once, checked (strict.ts), then visited. */
  visitStrict(s: object, d: unknown, kind: Kind, here: PathNode, path: string, key: unknown): void {
    const keys = kind === ARRAY ? null : Object.keys(s);
    const values = keys === null ? Array.from(s as unknown[]) : keys.map((k) => (s as Record<string, unknown>)[k]);
    if (keys === null) checkNumberArray(values, path, key, null, "");
    else checkTensorLookAlike(Object.fromEntries(keys.map((k, i) => [k, values[i]])), keys, path);
    for (let k = 0; k < values.length; k++) {
      const at = keys === null ? k : keys[k]!;
      this.visit(values[k], (d as Record<string | number, unknown>)[at], here, at);
    }
  }

  leaf(src: Side, s: object, d: unknown, node: PathNode | null, key: unknown): void {
    const dst = readSide(d, node, key, "destination");
    if (dst === undefined) {
      const other = otherCopyMark(d);
      if (other !== undefined) throw otherCopyError(other, formatPath(node, key), "the destination is ");
      throw invalidArgument(`no destination for this leaf (the destination has ${d === undefined ? "nothing" : `a ${typeName(d)}`} here)`, formatPath(node, key));
    }
    if (dst.dtype !== src.dtype) throw invalidArgument(`the destination's dtype is ${dst.dtype} but the leaf's is ${src.dtype}`, formatPath(node, key));
    if (!sameShape(dst.shape, src.shape)) {
      throw invalidArgument(`the destination's shape is [${dst.shape.join(", ")}] but the leaf's is [${src.shape.join(", ")}]`, formatPath(node, key));
    }
    if (this.target === undefined) this.target = dst.device;
    else if (dst.device !== this.target) {
      throw invalidArgument(`the destination is in ${where(dst.device)} but the destinations before it are in ${where(this.target)}`, formatPath(node, key));
    }
    if (dst.buffer !== undefined && isResizable(dst.buffer)) {
      throw invalidArgument("the destination's ArrayBuffer is resizable; copyInto writes only fixed-length buffers", formatPath(node, key));
    }
    const t = this.t;
    const i = t.count++;
    this.nodes.push(node);
    t.keys.push(key);
    t.leaves.push(s, d as object);
    t.views.push(src.view);
    this.destinationViews.push(dst.view);
    share(t, s);
    this.destinationBlocks.push(share(t, d));
    // Pinned memory of ours on either side: C marks its block busy until the copy is over.
    const srcFlags = src.buffer !== undefined && t.holdPinned(src.buffer) ? LEAF_PINNED : 0;
    const dstFlags = dst.buffer !== undefined && t.holdPinned(dst.buffer) ? LEAF_PINNED : 0;
    if (src.device !== DEVICE_CPU && !t.sourceDevices.includes(src.device)) t.sourceDevices.push(src.device);
    const size = DTYPE_SIZE[src.dtype];
    t.descriptors.words = putLeaf(t.descriptors.words, i, this.address(src), src.bytes, src.device, size, srcFlags);
    this.destinationWords = putLeaf(this.destinationWords, i, this.address(dst), dst.bytes, dst.device, size, dstFlags);
    if (src.layout !== undefined && src.bytes > 0) (t.layouts ??= []).push({ index: i, shape: src.layout.shape, byteStrides: src.layout.byteStrides });
    if (src.bytes > 0) {
      // Host and device memory never overlap: only a pair on one device is compared.
      if (src.device === dst.device && overlaps(dst, src)) throw invalidArgument("the destination overlaps the leaf itself", formatPath(node, key));
      const space = spaceOf(dst);
      if (space !== this.lastSpace || dst.begin < this.lastEnd) this.inOrder = this.lastSpace === undefined;
      this.lastSpace = space;
      this.lastEnd = dst.end;
    }
  }

  /** A side's address: a DeviceTensor's, a host view's now (pointerOf), or 0 until the bulk write at submit. */
  address(side: Side): number {
    if (side.view === undefined) return side.begin;
    return this.pointerOf === null ? 0 : this.pointerOf(side.view, true); // readSide read its .buffer
  }
}

const KIND_NAMES = ["an array", "a plain object", "a Map"] as const;

function containerKind(v: unknown): Kind | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  if (Array.isArray(v)) return ARRAY;
  if (v instanceof Map) return MAP;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null ? OBJECT : undefined;
}

function typeName(v: unknown): string {
  if (v === null) return "null";
  if (typeof v !== "object") return typeof v;
  return (v as object).constructor?.name ?? "object";
}

/** Every destination's range, from what the walk kept (its views and descriptors), for the full check. */
function destinationRanges(w: PairWalk): Range[] {
  const ranges: Range[] = [];
  const words = w.destinationWords;
  for (let i = 0; i < w.t.count; i++) {
    const at = i * LEAF_WORDS;
    const bytes = words[at + 2]! + words[at + 3]! * TWO_32;
    if (bytes === 0) continue;
    const view = w.destinationViews[i];
    if (view !== undefined) {
      const begin = viewByteOffset(view);
      ranges.push({ space: viewBuffer(view), begin, end: begin + viewByteLength(view), leaf: i });
    } else {
      const begin = words[at]! + words[at + 1]! * TWO_32;
      ranges.push({ space: words[at + 6]! | 0, begin, end: begin + bytes, leaf: i });
    }
  }
  return ranges;
}

/** No two destinations may share a byte: sorted by start, each must begin after the furthest end before it. */
function checkOverlaps(t: Traversal, ranges: Range[]): void {
  const bySpace = new Map<unknown, Range[]>();
  for (const r of ranges) {
    const list = bySpace.get(r.space);
    if (list === undefined) bySpace.set(r.space, [r]);
    else list.push(r);
  }
  for (const list of bySpace.values()) {
    // Destinations laid out in leaf order (the results of one copy) need no sort.
    let ordered = true;
    for (let k = 1; k < list.length && ordered; k++) ordered = list[k]!.begin >= list[k - 1]!.end;
    if (ordered) continue;
    list.sort((a, b) => a.begin - b.begin || a.leaf - b.leaf);
    let reach: Range | undefined;
    for (const r of list) {
      if (reach !== undefined && r.begin < reach.end) throw overlapError(t, r.leaf, reach.leaf);
      if (reach === undefined || r.end > reach.end) reach = r;
    }
  }
}

function overlapError(t: Traversal, a: number, b: number): MtcError {
  const [later, earlier] = a > b ? [a, b] : [b, a];
  const path = (i: number) => formatPath(t.intoNodes![i]!, t.keys[i]);
  const other = path(earlier);
  return invalidArgument(`the destination overlaps the destination of ${other === "" ? "(root)" : other}`, path(later));
}
