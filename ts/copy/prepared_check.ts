/**
 * A batch read against a prepared copy's template (prepared_template.ts):
 * in one pass, each value of the batch is read once, checked to be what the
 * template says lies there, and its address written into the copy's
 * descriptors (host leaves: prepared_host.ts); the output containers are
 * made on the way, with a place kept for each copied leaf. The first place
 * that differs is an MtcError naming its path, before any C call. Nothing
 * of one batch is kept for the next.
 *
 * @module
 */

import { otherCopyMark } from "../base/copy_identity.ts";
import { invalidArgument, invalidState, mapEntries, MtcError, showValue, Status } from "../base/errors.ts";
import { viewByteLength, viewKind, viewSubarray } from "../base/views.ts";
import { DeviceTensor, holderOf, isDeviceTensor, notADeviceTensor, tensorAddress, tensorBytes, tensorDevice, tensorDisposed, tensorDType, tensorShape } from "../tensor/device_tensor.ts";
import { naturalDType, storageElementBytes, storageProblem, type TypedArray } from "../tensor/dtype.ts";
import { showShape } from "../tensor/shape.ts";
import { releasedData, Tensor } from "../tensor/tensor.ts";
import { LEAF_BYTES } from "./describe.ts";
import { ARRAY, OBJECT } from "./path.ts";
import { type BatchRead, differs, hostLeaf } from "./prepared_host.ts";
import { CONTAINER, type ContainerNode, DEVICE, HOST, kindOf, type LeafNode, PASS, REUSED, type ReusedNode, STRIDED, type Template, type TemplateNode } from "./prepared_template.ts";
import { setValue } from "./traversal.ts";

const LEAF_WORDS = LEAF_BYTES / 4;
const TWO_32 = 4294967296;

/**
 * Reads `batch` against `template` into `r`: returns the output root (for
 * copied leaves, a place kept and filled once the copy is over). Two passes:
 * the first reads the batch (where user code may run: getters, Proxies) and
 * checks its structure, keeping each host leaf's array; the second, where no
 * user code runs, measures each array by the engine, then reads its buffer
 * and address. So an array detached or shrunk by a getter read after it is
 * found, and its address never dangles.
 */
export function readBatch(template: Template, batch: unknown, r: BatchRead, sampleFlags: Uint8Array | null): unknown {
  let root: unknown;
  try {
    root = read(template.root, batch, r, null);
  } catch (e) {
    throw firstWrongLength(template, r) ?? e; // an array read before the place that differs differs first
  }
  // A getter read later may have disposed a DeviceTensor placed as it is: the result would hand it back.
  for (let k = 0; k < r.placed.length; k++) {
    if (tensorDisposed(r.placed[k]!)) {
      throw new MtcError(Status.MTC_ERR_INVALID_STATE, "this DeviceTensor was disposed while the batch was read (by a getter in it?); nothing was copied", { path: r.placedPaths[k] });
    }
  }
  const views = r.t.views;
  for (let i = 0; i < views.length; i++) {
    const view = views[i];
    if (view === undefined) continue;
    const wrong = wrongLength(template.leaves[i]!, view);
    if (wrong !== undefined) throw wrong;
    hostLeaf(template.leaves[i]!, view, r, sampleFlags);
  }
  return root;
}

/** The first host leaf read so far whose array has not the sample's byte length, as its error. */
function firstWrongLength(template: Template, r: BatchRead): Error | undefined {
  const views = r.t.views;
  for (let i = 0; i < views.length; i++) {
    const view = views[i];
    const wrong = view === undefined ? undefined : wrongLength(template.leaves[i]!, view);
    if (wrong !== undefined) return wrong;
  }
  return undefined;
}

/** The error for a host leaf's array that the engine measures at another byte length than the sample's, or undefined. */
function wrongLength(leaf: LeafNode, view: TypedArray): Error | undefined {
  const bytes = viewByteLength(view);
  return bytes === viewBytesOf(leaf) ? undefined : bytesDiffer(leaf, view, bytes);
}

/** The bytes of the array a host leaf's copy reads: its own, or a strided leaf's storage span. */
function viewBytesOf(leaf: LeafNode): number {
  return leaf.what === STRIDED ? (leaf.end - leaf.begin) * leaf.storageSize : leaf.bytes;
}

function read(node: TemplateNode, v: unknown, r: BatchRead, out: object | null): unknown {
  switch (node.what) {
    case PASS:
      if (typeof v === "object" && v !== null && !passesThrough(v)) throw differs(node.path, `a pass-through value in the sample, ${kindOf(v)} now`);
      return v;
    case CONTAINER:
      return readContainer(node, v, r);
    case REUSED:
      return readReused(node, v, r);
    default:
      readLeaf(node, v, r);
      r.places[node.index] = out;
      return undefined; // the key keeps its place; the result is put there once it exists
  }
}

function readContainer(node: ContainerNode, v: unknown, r: BatchRead): unknown {
  const children = node.children;
  const n = node.length;
  if (node.kind === ARRAY) {
    if (!Array.isArray(v)) throw differs(node.path, `an array in the sample, ${kindOf(v)} now`);
    const length = v.length;
    if (length !== n) throw differs(node.path, `the sample's array has ${n} items, this one ${length}`);
    const out = new Array(n);
    for (let i = 0; i < n; i++) out[i] = read(children[i]!, v[i], r, out);
    return out;
  }
  if (node.kind === OBJECT) {
    if (typeof v !== "object" || v === null || Array.isArray(v) || !isPlainObject(v)) throw differs(node.path, `an object in the sample, ${kindOf(v)} now`);
    const keys = Object.keys(v);
    const expected = node.keys as string[];
    if (keys.length !== n || !sameKeys(keys, expected)) throw differs(node.path, keysDiffer(expected, keys));
    // A copy of the template's blank (its keys, in order), so that only containers and pass-through values are stored.
    const out: Record<string, unknown> = { ...node.blank };
    const input = v as Record<string, unknown>;
    for (let i = 0; i < n; i++) {
      const key = expected[i]!;
      const placed = read(children[i]!, input[key], r, out);
      if (placed === undefined) continue; // a leaf: the key keeps its place
      if (key === "__proto__") setValue(out, OBJECT, key, placed);
      else out[key] = placed;
    }
    return out;
  }
  if (!(v instanceof Map)) throw differs(node.path, `a Map in the sample, ${kindOf(v)} now`);
  const entries = mapEntries(v, node.path);
  const expected = node.keys;
  if (entries.length !== n) throw differs(node.path, `the sample's Map has ${n} entries, this one ${entries.length}`);
  const out = new Map<unknown, unknown>();
  for (let i = 0; i < n; i++) {
    const [key, value] = entries[i]!;
    if (!sameValueZero(key, expected[i])) throw differs(node.path, `entry ${i} of the Map has the key ${showValue(key)}, the sample's ${showValue(expected[i])}`);
    out.set(key, read(children[i]!, value, r, out));
  }
  return out;
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameValueZero(a: unknown, b: unknown): boolean {
  return a === b || (a !== a && b !== b);
}

function keysDiffer(expected: readonly string[], keys: readonly string[]): string {
  const missing = expected.find((k) => !keys.includes(k));
  if (missing !== undefined) return `the key ${JSON.stringify(missing)} is missing`;
  const extra = keys.find((k) => !expected.includes(k));
  if (extra !== undefined) return `the key ${JSON.stringify(extra)} is not in the sample`;
  return `its keys are in another order (the sample's: ${expected.map((k) => JSON.stringify(k)).join(", ")})`;
}

/** A value the plain copy passes through: no container, no leaf, none of another copy's. */
function passesThrough(v: object): boolean {
  if (v instanceof Tensor || v instanceof DeviceTensor || v instanceof Map || Array.isArray(v) || isPlainObject(v)) return false;
  if (ArrayBuffer.isView(v) && naturalDType(v) !== undefined) return false;
  return otherCopyMark(v) === undefined;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function readReused(node: ReusedNode, v: unknown, r: BatchRead): unknown {
  if (node.kind === "device") {
    if (!(v instanceof DeviceTensor)) throw differs(node.path, `a DeviceTensor on the target in the sample, ${kindOf(v)} now`);
    if (!isDeviceTensor(v)) throw notADeviceTensor(node.path);
    if (tensorDisposed(v)) throw invalidState("this DeviceTensor was disposed and cannot be copied", node.path);
    if (tensorDevice(v) !== r.target) throw differs(node.path, `a DeviceTensor on the target in the sample, one on another device now`);
    r.placed.push(v);
    r.placedPaths.push(node.path);
  } else if (node.kind === "tensor") {
    if (!(v instanceof Tensor) || v.strides !== undefined) throw differs(node.path, `a dense Tensor in the sample, ${kindOf(v)} now`);
  } else if (!ArrayBuffer.isView(v) || v instanceof Tensor || naturalDType(v) === undefined) {
    throw differs(node.path, `a typed array in the sample, ${kindOf(v)} now`);
  }
  return v;
}

function sameShape(shape: unknown, expected: readonly number[]): boolean {
  if (shape === expected) return true;
  if (!Array.isArray(shape) || shape.length !== expected.length) return false;
  for (let d = 0; d < expected.length; d++) if (shape[d] !== expected[d]) return false;
  return true;
}

function shapeDiffers(node: LeafNode, shape: unknown): Error {
  const now = Array.isArray(shape) ? showShape(shape.slice()) : showValue(shape);
  return differs(node.path, `its shape was ${showShape(node.shape)} in the sample, ${now} now`);
}

/** Why a leaf's data of `bytes` (the engine's count, -1: no typed array) is not the sample's. */
function bytesDiffer(node: LeafNode, data: unknown, bytes: number, what = node.tensor ? "the Tensor's data" : "the array", expected = viewBytesOf(node)): Error {
  if (bytes < 0) return differs(node.path, `${what} is not a typed array`);
  const released = releasedData(data, node.tensor ? "the Tensor's" : "the array's");
  if (released !== undefined) return invalidState(`${released}; nothing was copied`, node.path);
  return differs(node.path, `${what} holds ${bytes} bytes, the sample's ${expected}${bytes === 0 ? " (was its buffer detached?)" : ""}`);
}

function readLeaf(node: LeafNode, v: unknown, r: BatchRead): void {
  if (node.what === DEVICE) return readDevice(node, v, r);
  let data: TypedArray;
  if (!node.tensor) {
    if (v instanceof Tensor || !ArrayBuffer.isView(v)) throw differs(node.path, `a typed array in the sample, ${kindOf(v)} now`);
    const dtype = naturalDType(v);
    if (dtype !== node.dtype) throw differs(node.path, `a typed array of ${node.dtype} in the sample, ${kindOf(v)} now`);
    data = v as TypedArray; // measured in the second pass
  } else {
    if (!(v instanceof Tensor)) throw differs(node.path, `a Tensor in the sample, ${kindOf(v)} now`);
    const strides = v.strides;
    const source = v.data;
    const dtype = v.dtype;
    const shape = v.shape;
    if (dtype !== node.dtype) throw differs(node.path, `its dtype was ${node.dtype} in the sample, ${showValue(dtype)} now`);
    if (!sameShape(shape, node.shape)) throw shapeDiffers(node, shape);
    // The sample's kind of array stores this dtype: only another kind needs the full check.
    if (viewKind(source) !== node.storageKind) {
      const storage = storageProblem(source, dtype);
      if (storage !== undefined) throw invalidArgument(storage, node.path);
    }
    if (node.what === HOST) {
      if (strides !== undefined) throw differs(node.path, "a dense Tensor in the sample, a strided one now");
      const offset = v.offset;
      if (offset !== 0 && offset !== undefined) throw differs(node.path, `its offset was 0 in the sample, ${showValue(offset)} now`);
      data = source; // measured in the second pass
    } else {
      data = stridedView(node, v, source, strides);
    }
  }
  r.t.views[node.index] = data;
}

/** A strided Tensor's storage span, once its layout is found to be the sample's. */
function stridedView(node: LeafNode, leaf: Tensor, data: TypedArray, strides: readonly number[] | undefined): TypedArray {
  const offset = leaf.offset;
  const expected = node.strides!;
  if (strides === undefined || !sameShape(strides, expected)) {
    const now = strides === undefined ? "none (dense)" : Array.isArray(strides) ? showShape(strides.slice()) : showValue(strides);
    throw differs(node.path, `its strides were ${showShape(expected)} in the sample, ${now} now`);
  }
  if (offset !== node.offset) throw differs(node.path, `its offset was ${node.offset} in the sample, ${showValue(offset)} now`);
  const bytes = viewByteLength(data);
  if (bytes !== node.dataBytes) throw bytesDiffer(node, data, bytes, "the Tensor's data", node.dataBytes);
  if (storageElementBytes(data) !== node.storageSize) throw differs(node.path, `its data is ${kindOf(data)}, of another element size than the sample's`);
  return viewSubarray(data, node.begin, node.end);
}

/** A DeviceTensor of another device: its block held until the copy has read it. */
function readDevice(node: LeafNode, v: unknown, r: BatchRead): void {
  if (!(v instanceof DeviceTensor)) throw differs(node.path, `a DeviceTensor in the sample, ${kindOf(v)} now`);
  if (!isDeviceTensor(v)) throw notADeviceTensor(node.path);
  if (tensorDisposed(v)) throw invalidState("this DeviceTensor was disposed and cannot be copied", node.path);
  if (tensorDevice(v) !== node.device) throw differs(node.path, `a DeviceTensor on cuda:${node.device} in the sample, on cuda:${tensorDevice(v)} now`);
  if (tensorDType(v) !== node.dtype) throw differs(node.path, `its dtype was ${node.dtype} in the sample, ${tensorDType(v)} now`);
  if (!sameShape(tensorShape(v), node.shape) || tensorBytes(v) !== node.bytes) throw shapeDiffers(node, tensorShape(v));
  const holder = holderOf(v);
  if (holder !== null) {
    holder.acquire(); // the source block lives until the copy has read it
    r.t.shares.push(holder);
  }
  const address = tensorAddress(v);
  const at = node.index * LEAF_WORDS;
  r.words[at] = address >>> 0;
  r.words[at + 1] = (address / TWO_32) >>> 0;
  r.t.views[node.index] = undefined;
}
