/**
 * What arenas do with whole batches: `Arena#consolidate` (a batch's leaves
 * written into the arena) and {@link startArenaCopy} (the arena's used bytes
 * as one copy, with no walk).
 *
 * @module
 */

import { Arena, ARENA_ALIGNMENT, setConsolidateHook } from "../tensor/arena.ts";
import { DeviceTensor, isDeviceTensor, notADeviceTensor, tensorDisposed } from "../tensor/device_tensor.ts";
import { type DType, DTYPE_SIZE, isDType, naturalDType, storageCopy, type TypedArray } from "../tensor/dtype.ts";
import { constructedShape, constructedSize, releasedData, Tensor, trustedTensor } from "../tensor/tensor.ts";
import { checkedShape, elementCount } from "../tensor/shape.ts";
import type { Device } from "../gpu/device.ts";
import { otherCopyError, otherCopyMark } from "../base/copy_identity.ts";
import { invalidArgument, mapEntries, MtcError, Status } from "../base/errors.ts";
import { isDetached, viewBuffer, viewByteLength } from "../base/views.ts";
import type { AsyncCopyHandle } from "./handle.ts";
import type { CopyOptions } from "./options.ts";
import { ARRAY, formatPath, MAP, OBJECT, type PathNode } from "./path.ts";
import { startCopy } from "./start_copy.ts";
import { defineKey, reachesPrototype, setValue } from "./traversal.ts";

/** A container of the mirror: where it sits in the batch (for paths), and the new container. */
interface Container extends PathNode {
  readonly parent: Container | null;
  readonly output: unknown[] | Record<string, unknown> | Map<unknown, unknown>;
}

/** A leaf to write into the arena, as read once (its path is written only for an error). */
interface Pending {
  /** The caller's typed array (a Tensor's data). */
  readonly source: TypedArray;
  /** Its byte length when read (a getter later in the walk may detach or shrink it). */
  readonly size: number;
  readonly dtype: DType;
  /** The Tensor's frozen shape; null for a bare typed array. */
  readonly shape: readonly number[] | null;
  /** Where its copy goes: the container (null: the batch is this leaf) and the key there. */
  readonly node: Container | null;
  readonly key: unknown;
}

/** Containers nearer the root than this are checked for cycles by scanning the path; deeper ones through a Set. */
const SCAN_DEPTH = 16;

/** What one walk keeps: the leaves it listed, and the containers on the path being walked. */
interface Walk {
  readonly pending: Pending[];
  /** The containers from the root to the one being walked (a cycle meets one of them again). */
  readonly path: object[];
  /** Those of them deeper than SCAN_DEPTH. */
  readonly deep: Set<object>;
}

function leafError(node: PathNode | null, key: unknown, why: string, status: number = Status.MTC_ERR_INVALID_ARGUMENT): MtcError {
  const path = formatPath(node, key);
  return new MtcError(status, `Arena.consolidate: ${path === "" ? "the batch" : `batch${path}`}: ${why}`, { path });
}

/**
 * Why the typed array `data` cannot be read, or undefined: not a typed
 * array, a detached buffer (memory of the library's released throws the
 * MTC_ERR_INVALID_STATE of a use after dispose), or a
 * fixed-length view its resizable buffer shrank past (these read as
 * empty, or throw a bare TypeError, instead of saying so). Asked only of
 * a view of no bytes: one with bytes is none of these.
 */
function unreadable(data: unknown, whose: string, node: Container | null, key: unknown): string | undefined {
  if (viewByteLength(data) < 0) return `${whose} data is not a typed array`;
  const released = releasedData(data, whose);
  if (released !== undefined) throw leafError(node, key, released, Status.MTC_ERR_INVALID_STATE); // as every use after dispose
  const buffer = viewBuffer(data as ArrayBufferView);
  let gone = false;
  try {
    gone = isDetached(buffer as ArrayBuffer);
  } catch {
    // a SharedArrayBuffer: never detached
  }
  if (gone) return `${whose} ArrayBuffer was detached (transferred); a detached array cannot be read`;
  try {
    (data as Uint8Array).at(0); // throws only when the view is out of bounds
  } catch {
    return `${whose} view is out of bounds of its resizable ArrayBuffer, shrunk after the view was made`;
  }
  return undefined;
}

/** A Tensor leaf, each field read once: the shape its constructor froze, whatever the field says now. */
function tensorLeaf(value: Tensor, node: Container | null, key: unknown, w: Walk): undefined {
  const source = value.data, dtype = value.dtype;
  let shape = constructedShape(value);
  let elements: number;
  if (shape !== undefined) elements = constructedSize(value);
  else {
    // Made without the constructor: its shape is checked (and frozen) here.
    shape = checkedShape(value.shape);
    elements = shape === undefined ? NaN : elementCount(shape);
  }
  if (value.strides !== undefined) throw leafError(node, key, "a strided Tensor; pass a dense one (consolidate keeps layouts as they are)");
  const size = viewByteLength(source);
  if (size <= 0) {
    const why = unreadable(source, "the Tensor's", node, key);
    if (why !== undefined) throw leafError(node, key, why);
  }
  if (!isDType(dtype) || size !== elements * DTYPE_SIZE[dtype]) {
    throw leafError(node, key, "the Tensor's data and dtype do not hold its shape (a field reassigned since it was made?)");
  }
  w.pending.push({ source, size, dtype, shape: shape!, node, key });
  return undefined; // its place, until its copy is made
}

/** A bare typed array leaf of its natural `dtype`. */
function arrayLeaf(source: TypedArray, dtype: DType, node: Container | null, key: unknown, w: Walk): undefined {
  const size = viewByteLength(source);
  if (size <= 0) {
    const why = unreadable(source, "its", node, key);
    if (why !== undefined) throw leafError(node, key, why);
  }
  if (size % DTYPE_SIZE[dtype] !== 0) throw leafError(node, key, `its ${size} bytes are no whole number of ${dtype} elements (its constructor is another kind's?)`);
  w.pending.push({ source, size, dtype, shape: null, node, key });
  return undefined;
}

/**
 * What goes at (node, key) for the object `value`: undefined for a leaf
 * (listed in `w`), the mirror of a container, anything else as it is.
 * The cheapest tests first: arrays and typed arrays by the engine's own
 * checks, plain objects by their prototype.
 */
function visit(value: object, node: Container | null, key: unknown, w: Walk): unknown {
  if (Array.isArray(value)) return mirrorArray(value, node, key, w);
  if (ArrayBuffer.isView(value)) {
    const dtype = naturalDType(value);
    if (dtype !== undefined) return arrayLeaf(value as TypedArray, dtype, node, key, w);
  }
  if (value instanceof Tensor) return tensorLeaf(value, node, key, w);
  const proto = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) return mirrorObject(value as Record<string, unknown>, node, key, w);
  if (value instanceof DeviceTensor) {
    // Kept as it is; one no copy could read is refused here, as startCopy would.
    if (!isDeviceTensor(value)) throw notADeviceTensor(formatPath(node, key), "Arena.consolidate: ");
    if (tensorDisposed(value)) throw leafError(node, key, "this DeviceTensor was disposed", Status.MTC_ERR_INVALID_STATE);
    return value;
  }
  if (value instanceof Map) return mirrorMap(value, node, key, w);
  const other = otherCopyMark(value);
  if (other !== undefined) throw otherCopyError(other, formatPath(node, key), "Arena.consolidate: ");
  return value; // a class instance: kept as it is, like any non-tensor leaf
}

/** Puts `value` on the walk's path; throws when it is on it already (the batch contains itself). */
function enter(w: Walk, value: object, node: Container | null, key: unknown): void {
  const path = w.path;
  const scanned = Math.min(path.length, SCAN_DEPTH);
  for (let i = 0; i < scanned; i++) {
    if (path[i] === value) throw leafError(node, key, "the batch contains itself (a cycle)");
  }
  if (path.length >= SCAN_DEPTH) {
    if (w.deep.has(value)) throw leafError(node, key, "the batch contains itself (a cycle)");
    w.deep.add(value);
  }
  path.push(value);
}

function leave(w: Walk, value: object): void {
  const path = w.path;
  path.pop();
  if (path.length >= SCAN_DEPTH) w.deep.delete(value);
}

function mirrorArray(value: unknown[], node: Container | null, key: unknown, w: Walk): unknown[] {
  enter(w, value, node, key);
  const items = value.slice();
  const n = items.length;
  const out: unknown[] = new Array(n);
  const here: Container = { parent: node, key, kind: ARRAY, output: out };
  for (let i = 0; i < n; i++) {
    if (!(i in items)) continue; // a hole stays one
    const item = items[i];
    out[i] = typeof item !== "object" || item === null ? item : visit(item, here, i, w);
  }
  leave(w, value);
  return out;
}

function mirrorObject(value: Record<string, unknown>, node: Container | null, key: unknown, w: Walk): Record<string, unknown> {
  enter(w, value, node, key);
  const out: Record<string, unknown> = {};
  const here: Container = { parent: node, key, kind: OBJECT, output: out };
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    const item = value[k];
    const mirrored = typeof item !== "object" || item === null ? item : visit(item, here, k, w);
    if (reachesPrototype(k)) defineKey(out, k, mirrored); // a key, not the prototype's
    else out[k] = mirrored;
  }
  leave(w, value);
  return out;
}

function mirrorMap(value: Map<unknown, unknown>, node: Container | null, key: unknown, w: Walk): Map<unknown, unknown> {
  enter(w, value, node, key);
  const out = new Map<unknown, unknown>();
  const here: Container = { parent: node, key, kind: MAP, output: out };
  for (const [k, item] of mapEntries(value, formatPath(node, key))) out.set(k, typeof item !== "object" || item === null ? item : visit(item, here, k, w));
  leave(w, value);
  return out;
}

/** `n` rounded up to a multiple of ARENA_ALIGNMENT (in integer steps: a division and Math.ceil cost more a leaf). */
function aligned(n: number): number {
  const rest = n % ARENA_ALIGNMENT;
  return rest === 0 ? n : n + ARENA_ALIGNMENT - rest;
}

/**
 * The walk lists the leaves and mirrors the containers; then, once every
 * leaf is known to be readable and to fit, one memcpy a leaf into views of
 * the arena's buffer, laid out as Arena#tensor would, each put in its place.
 */
function consolidate(arena: Arena, batch: unknown): unknown {
  const w: Walk = { pending: [], path: [], deep: new Set() };
  const root = typeof batch !== "object" || batch === null ? batch : visit(batch, null, undefined, w);
  const pending = w.pending;
  const count = pending.length;
  if (count === 0) return root;
  // The walk ran the caller's getters: a buffer read early may have been detached or
  // shrunk since (a view of a resizable one that grew is copied as it was read).
  const start = arena.used;
  let end = start;
  let grown = false;
  for (let i = 0; i < count; i++) {
    const leaf = pending[i]!;
    const now = viewByteLength(leaf.source);
    if (now !== leaf.size) {
      if (now < leaf.size) {
        const path = formatPath(leaf.node, leaf.key);
        throw invalidArgument(`Arena.consolidate: batch${path}: its buffer was detached or shrunk while the batch was read`, path);
      }
      grown = true;
    }
    end = aligned(end) + leaf.size;
  }
  // Nothing is taken unless every leaf fits; no code of the caller's runs from here on.
  if (end > arena.capacity) {
    throw new MtcError(Status.MTC_ERR_OUT_OF_MEMORY, `Arena.consolidate: the batch needs ${end - start} bytes, the arena has ${arena.capacity - start} of ${arena.capacity} left`);
  }
  const buffer = arena.takeUpTo("Arena.consolidate", end);
  let offset = start;
  for (let i = 0; i < count; i++) {
    const { source, size, dtype, shape, node, key } = pending[i]!;
    offset = aligned(offset);
    const copy = storageCopy(dtype, buffer, offset, source, size, !grown || viewByteLength(source) === size);
    const made = shape === null ? copy : trustedTensor(copy, shape, dtype);
    if (node === null) return made; // the batch is this one leaf
    setValue(node.output, node.kind, key, made);
    offset += size;
  }
  return root;
}

setConsolidateHook(consolidate);

/**
 * The whole batch that `arena` holds, in one copy with no walk: its used
 * bytes (every tensor handed out since the last reset) go to `device` as one
 * DMA from where they lie into one device block. `arena.twin(onDevice, t)`
 * then gives each arena tensor's device twin (same dtype, shape and offset).
 * The fastest way from an arena to a GPU. The handle's result is that block
 * as a uint8 DeviceTensor; it and the twins share it (dispose each). The
 * arena stays busy until the copy is over. Options as startCopy's.
 *
 * @example
 * ```ts
 * const boxes = arena.tensor("float32", [100, 4]);
 * const ids = arena.array("int32", 100);
 * // ... fill them ...
 * using onDevice = await startArenaCopy(arena, "cuda:0");
 * using boxesOnGpu = arena.twin(onDevice, boxes);
 * ```
 */
export function startArenaCopy(arena: Arena, device: "cuda" | `cuda:${number}`, options?: CopyOptions): AsyncCopyHandle<DeviceTensor>;
/** To `"cpu"` the result is a host copy of the used bytes (pinned memory), as startCopy gives. */
export function startArenaCopy(arena: Arena, device: "cpu", options?: CopyOptions): AsyncCopyHandle<Uint8Array<ArrayBuffer>>;
/** A device known only at run time: a DeviceTensor, or a Uint8Array when it is `"cpu"`. */
export function startArenaCopy(arena: Arena, device: Device, options?: CopyOptions): AsyncCopyHandle<DeviceTensor | Uint8Array<ArrayBuffer>>;
export function startArenaCopy(arena: Arena, device: Device, options?: CopyOptions): AsyncCopyHandle<DeviceTensor | Uint8Array<ArrayBuffer>> {
  if (!(arena instanceof Arena)) {
    const other = otherCopyMark(arena);
    if (other !== undefined) throw otherCopyError(other, undefined, "startArenaCopy: ");
    throw invalidArgument("startArenaCopy: the first argument must be an Arena");
  }
  return startCopy(arena.usedBytes(), device, options) as unknown as AsyncCopyHandle<DeviceTensor | Uint8Array<ArrayBuffer>>;
}
