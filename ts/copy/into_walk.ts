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

import { invalidArgument, type MtcError } from "../base/errors.ts";
import { DEVICE_CPU, deviceName } from "../gpu/device.ts";
import { constructedDeviceShape, DeviceTensor, holderOf } from "../tensor/device_tensor.ts";
import { DTYPE_SIZE, type DType, isDType, naturalDType, type TypedArray } from "../tensor/dtype.ts";
import { checkedShape, elementCount, vectorShape } from "../tensor/shape.ts";
import { Tensor } from "../tensor/tensor.ts";
import type { PointerOf } from "./describe.ts";
import { ARRAY, formatPath, type Kind, MAP, OBJECT, type PathNode } from "./path.ts";
import { Traversal } from "./traversal.ts";

const LEAF_WORDS = 10; // sizeof(mtc_leaf) / 4
const TWO_32 = 4294967296;

/** One side of a leaf pair, as read once. */
interface Side {
  /** Host memory: the view the copy reads or writes. */
  readonly view: TypedArray | undefined;
  /** DeviceTensor: its address and device. */
  readonly address: number;
  readonly device: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly bytes: number;
}

/** What the walk of a copyInto gives: the traversal (sources, paths, held objects) and the destination descriptors. */
export interface IntoWalk {
  readonly t: Traversal;
  /** One mtc_leaf per listed leaf: where it goes. */
  destinationWords: Uint32Array;
  /** The host views written (undefined for device destinations), for addresses in bulk. */
  readonly destinationViews: (TypedArray | undefined)[];
  /** The target: the device of every destination (-1: host). */
  readonly target: number;
}

/** A tensor leaf as copyInto sees it, or undefined for anything else. */
function readSide(v: unknown, path: () => string, role: string): Side | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  if (v instanceof DeviceTensor) {
    if (v.disposed) throw invalidArgument(`the ${role} DeviceTensor was disposed`, path());
    let shape = v.shape;
    if (shape !== constructedDeviceShape(v)) shape = checkedShape(shape) ?? constructedDeviceShape(v);
    return { view: undefined, address: v.address, device: v.deviceIndex, dtype: v.dtype, shape, bytes: v.byteLength };
  }
  if (v instanceof Tensor) {
    let data = v.data; // read once: a getter may give another array each time
    const shape = checkedShape(v.shape);
    if (shape === undefined || !ArrayBuffer.isView(data) || !isDType(v.dtype) || data.byteLength !== elementCount(shape) * DTYPE_SIZE[v.dtype]) {
      throw invalidArgument(`the ${role} Tensor's data, shape and dtype do not agree`, path());
    }
    if (role === "source") data = fixed(data);
    return { view: data, address: 0, device: DEVICE_CPU, dtype: v.dtype, shape, bytes: data.byteLength };
  }
  if (ArrayBuffer.isView(v)) {
    const dtype = naturalDType(v);
    if (dtype === undefined) return undefined; // a DataView is no tensor
    const view = role === "source" ? fixed(v as TypedArray) : v as TypedArray;
    return { view, address: 0, device: DEVICE_CPU, dtype, shape: vectorShape(view.length), bytes: view.byteLength };
  }
  return undefined;
}

/**
 * A source on a resizable ArrayBuffer is copied from a snapshot of its own,
 * so resizing the caller's buffer while the copy runs cannot pull memory
 * from under it (as startCopy does).
 */
function fixed(data: TypedArray): TypedArray {
  const resizable = (data.buffer as ArrayBuffer & { resizable?: boolean }).resizable === true;
  return resizable && data.byteLength > 0 ? (data as Uint8Array).slice() as unknown as TypedArray : data;
}

function where(device: number): string {
  return device === DEVICE_CPU ? "host memory" : deviceName(device);
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((n, k) => n === b[k]);
}

/** Writes one mtc_leaf at index i of words (grown by doubling when full); returns the words. */
function putLeaf(words: Uint32Array, i: number, address: number, bytes: number, device: number, elementSize: number): Uint32Array {
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
  words[at + 9] = 0; // flags
  return words;
}

/** A byte range one leaf pair touches, for the overlap checks. */
interface Range {
  /** The ArrayBuffer (host) or the device number (device memory). */
  readonly space: unknown;
  readonly begin: number;
  readonly end: number;
  readonly leaf: number;
}

function rangeOf(side: Side, leaf: number): Range {
  if (side.view !== undefined) {
    const begin = side.view.byteOffset;
    return { space: side.view.buffer, begin, end: begin + side.bytes, leaf };
  }
  return { space: side.device, begin: side.address, end: side.address + side.bytes, leaf };
}

function overlaps(a: Range, b: Range): boolean {
  return a.space === b.space && a.begin < b.end && b.begin < a.end;
}

/**
 * Walks `source` and `destination` together. `pointerOf` reads host
 * addresses now (Bun); null leaves them for a bulk write at submit (Deno).
 */
export function walkInto(source: unknown, destination: unknown, descriptors: { words: Uint32Array }, pointerOf: PointerOf | null): IntoWalk {
  const t = new Traversal(DEVICE_CPU, descriptors);
  const nodes: (PathNode | null)[] = (t.intoNodes = []);
  t.root[0] = destination;
  const walk: IntoWalk = { t, destinationWords: new Uint32Array(64 * LEAF_WORDS), destinationViews: [], target: DEVICE_CPU };
  let target: number | undefined;
  const ranges: Range[] = [];
  const onPath = new Set<object>();

  const leaf = (src: Side, s: object, d: unknown, node: PathNode | null, key: unknown) => {
    const path = () => formatPath(node, key);
    const dst = readSide(d, path, "destination");
    if (dst === undefined) {
      throw invalidArgument(`no destination for this leaf (the destination has ${d === undefined ? "nothing" : `a ${typeName(d)}`} here)`, path());
    }
    if (dst.dtype !== src.dtype) throw invalidArgument(`the destination's dtype is ${dst.dtype} but the leaf's is ${src.dtype}`, path());
    if (!sameShape(dst.shape, src.shape)) {
      throw invalidArgument(`the destination's shape is [${dst.shape.join(", ")}] but the leaf's is [${src.shape.join(", ")}]`, path());
    }
    if (target === undefined) target = dst.device;
    else if (dst.device !== target) {
      throw invalidArgument(`the destination is in ${where(dst.device)} but the destinations before it are in ${where(target)}`, path());
    }
    if (dst.view !== undefined && (dst.view.buffer as ArrayBuffer & { resizable?: boolean }).resizable === true) {
      throw invalidArgument("the destination's ArrayBuffer is resizable; copyInto writes only fixed-length buffers", path());
    }
    const i = t.count++;
    nodes.push(node);
    t.keys.push(key);
    t.leaves.push(s, d as object);
    t.views.push(src.view);
    walk.destinationViews.push(dst.view);
    for (const tensor of [s, d]) {
      const holder = tensor instanceof DeviceTensor ? holderOf(tensor) : null;
      if (holder !== null) {
        holder.acquire(); // the block lives until the copy is over
        t.shares.push(holder);
      }
    }
    if (src.device !== DEVICE_CPU && !t.sourceDevices.includes(src.device)) t.sourceDevices.push(src.device);
    const size = DTYPE_SIZE[src.dtype];
    const address = (side: Side) => side.view === undefined ? side.address : pointerOf === null ? 0 : pointerOf(side.view);
    t.descriptors.words = putLeaf(t.descriptors.words, i, address(src), src.bytes, src.device, size);
    walk.destinationWords = putLeaf(walk.destinationWords, i, address(dst), dst.bytes, dst.device, size);
    if (src.bytes > 0) {
      const range = rangeOf(dst, i);
      if (overlaps(range, rangeOf(src, i))) throw invalidArgument("the destination overlaps the leaf itself", path());
      ranges.push(range);
    }
  };

  const visit = (s: unknown, d: unknown, node: PathNode | null, key: unknown) => {
    if (typeof s !== "object" || s === null) return; // not a tensor: ignored
    const path = () => formatPath(node, key);
    const src = readSide(s, path, "source");
    if (src !== undefined) return leaf(src, s, d, node, key);
    const kind = containerKind(s);
    if (kind === undefined) return; // class instances, Sets, ...: ignored
    if (onPath.has(s)) throw invalidArgument("cycle: this container contains itself", path());
    if (containerKind(d) !== kind) {
      throw invalidArgument(`the destination has ${d === undefined ? "nothing" : `a ${typeName(d)}`} where the source has ${KIND_NAMES[kind]}`, path());
    }
    onPath.add(s);
    const here: PathNode = { parent: node, key, kind };
    if (kind === ARRAY) (s as unknown[]).forEach((v, k) => visit(v, (d as unknown[])[k], here, k));
    else if (kind === MAP) for (const [k, v] of s as Map<unknown, unknown>) visit(v, (d as Map<unknown, unknown>).get(k), here, k);
    else for (const k of Object.keys(s)) visit((s as Record<string, unknown>)[k], (d as Record<string, unknown>)[k], here, k);
    onPath.delete(s);
  };

  try {
    visit(source, destination, null, undefined);
    checkOverlaps(t, ranges);
  } catch (e) {
    t.dropShares();
    throw e;
  }
  return { ...walk, target: target ?? DEVICE_CPU };
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

/** No two destinations may share a byte: sorted by start, each must begin after the furthest end before it. */
function checkOverlaps(t: Traversal, ranges: Range[]): void {
  const bySpace = new Map<unknown, Range[]>();
  for (const r of ranges) {
    const list = bySpace.get(r.space);
    if (list === undefined) bySpace.set(r.space, [r]);
    else list.push(r);
  }
  for (const list of bySpace.values()) {
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
