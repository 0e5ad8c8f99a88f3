/**
 * What arenas do with whole batches: `Arena#consolidate` (a batch's leaves
 * written into the arena) and {@link startArenaCopy} (the arena's used bytes
 * as one copy, with no walk).
 *
 * @module
 */

import { Arena, ARENA_ALIGNMENT, setConsolidateHook } from "../tensor/arena.ts";
import { DeviceTensor, isDeviceTensor, notADeviceTensor, tensorDisposed } from "../tensor/device_tensor.ts";
import { type DType, DTYPE_SIZE, isDType, isTypedArray, naturalDType, type TypedArray } from "../tensor/dtype.ts";
import { constructedShape, releasedData, Tensor } from "../tensor/tensor.ts";
import { elementCount } from "../tensor/shape.ts";
import type { Device } from "../gpu/device.ts";
import { otherCopyError, otherCopyMark } from "../base/copy_identity.ts";
import { invalidArgument, MtcError, Status } from "../base/errors.ts";
import { isDetached, viewBuffer, viewByteLength, viewByteOffset } from "../base/views.ts";
import type { AsyncCopyHandle } from "./handle.ts";
import type { CopyOptions } from "./options.ts";
import { ARRAY, formatPath, type Kind, MAP, OBJECT, type PathNode } from "./path.ts";
import { startCopy } from "./start_copy.ts";

/** A leaf to write into the arena: what it is, as read once, and where its copy goes. */
interface Pending {
  readonly bytes: Uint8Array;
  /** bytes.byteLength when it was read (a getter later in the walk may detach the buffer). */
  readonly size: number;
  readonly path: string;
  readonly dtype: DType;
  readonly shape: readonly number[] | null; // null: a bare typed array
  readonly place: (value: unknown) => void;
}

function leafError(node: PathNode | null, key: unknown, why: string): MtcError {
  const path = formatPath(node, key);
  return invalidArgument(`Arena.consolidate: ${path === "" ? "the batch" : `batch${path}`}: ${why}`, path);
}

/**
 * Why the typed array `data` cannot be read, or undefined: not a typed
 * array, memory of the library's released, a detached buffer, or a
 * fixed-length view its resizable buffer shrank past (these read as
 * empty, or throw a bare TypeError, instead of saying so).
 */
function unreadable(data: unknown, whose: string): string | undefined {
  if (viewByteLength(data) < 0) return `${whose} data is not a typed array`;
  const released = releasedData(data, whose);
  if (released !== undefined) return released;
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

/** The bytes of a dense view, as the engine sees them. */
function bytesOf(view: ArrayBufferView): Uint8Array {
  return new Uint8Array(viewBuffer(view), viewByteOffset(view), viewByteLength(view));
}

/** Mirrors `value` (containers new, leaves listed in `pending`); returns the mirror. */
function mirror(value: unknown, node: PathNode | null, key: unknown, pending: Pending[], seen: Set<object>, place: (v: unknown) => void): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (value instanceof DeviceTensor) {
    // Kept as it is; one no copy could read is refused here, as startCopy would.
    if (!isDeviceTensor(value)) throw notADeviceTensor(formatPath(node, key), "Arena.consolidate: ");
    if (tensorDisposed(value)) throw leafError(node, key, "this DeviceTensor was disposed");
    return value;
  }
  if (value instanceof Tensor) {
    // Each field read once; the shape its constructor froze, whatever the field says now.
    const data = value.data, dtype = value.dtype, shape = constructedShape(value) ?? value.shape;
    if (value.strides !== undefined) throw leafError(node, key, "a strided Tensor; pass a dense one (consolidate keeps layouts as they are)");
    const why = unreadable(data, "the Tensor's");
    if (why !== undefined) throw leafError(node, key, why);
    const bytes = bytesOf(data);
    if (!isDType(dtype) || bytes.byteLength !== elementCount(shape) * DTYPE_SIZE[dtype]) {
      throw leafError(node, key, "the Tensor's data and dtype do not hold its shape (a field reassigned since it was made?)");
    }
    pending.push({ bytes, size: bytes.byteLength, path: formatPath(node, key), dtype, shape, place });
    return undefined;
  }
  if (isTypedArray(value)) {
    const why = unreadable(value, "its");
    if (why !== undefined) throw leafError(node, key, why);
    const bytes = bytesOf(value);
    pending.push({ bytes, size: bytes.byteLength, path: formatPath(node, key), dtype: naturalDType(value)!, shape: null, place });
    return undefined;
  }
  if (seen.has(value)) throw leafError(node, key, "the batch contains itself (a cycle)");
  let kind: Kind;
  let out: unknown[] | Record<string, unknown> | Map<unknown, unknown>;
  if (Array.isArray(value)) kind = ARRAY;
  else if (value instanceof Map) kind = MAP;
  else if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) kind = OBJECT;
  else {
    const other = otherCopyMark(value);
    if (other !== undefined) throw otherCopyError(other, formatPath(node, key), "Arena.consolidate: ");
    return value; // a class instance: kept as it is, like any non-tensor leaf
  }
  seen.add(value);
  const here: PathNode = { parent: node, key, kind };
  if (kind === ARRAY) {
    const items = (value as unknown[]).slice();
    const arr: unknown[] = new Array(items.length);
    items.forEach((item, i) => (arr[i] = mirror(item, here, i, pending, seen, (v) => (arr[i] = v))));
    out = arr;
  } else if (kind === MAP) {
    const map = new Map<unknown, unknown>();
    for (const [k, item] of [...(value as Map<unknown, unknown>)]) map.set(k, mirror(item, here, k, pending, seen, (v) => map.set(k, v)));
    out = map;
  } else {
    const obj: Record<string, unknown> = {};
    for (const k of Object.keys(value)) {
      const item = (value as Record<string, unknown>)[k];
      const v = mirror(item, here, k, pending, seen, (x) => Object.defineProperty(obj, k, { value: x, writable: true, enumerable: true, configurable: true }));
      Object.defineProperty(obj, k, { value: v, writable: true, enumerable: true, configurable: true });
    }
    out = obj;
  }
  seen.delete(value);
  return out;
}

function consolidate(arena: Arena, batch: unknown): unknown {
  const pending: Pending[] = [];
  const root: unknown[] = [undefined];
  root[0] = mirror(batch, null, undefined, pending, new Set(), (v) => (root[0] = v));
  // The walk ran the caller's getters: a buffer read early may have been detached since.
  for (const leaf of pending) {
    if (leaf.bytes.byteLength !== leaf.size) {
      throw invalidArgument(`Arena.consolidate: batch${leaf.path}: its buffer was detached or shrunk while the batch was read`, leaf.path);
    }
  }
  // Nothing is taken unless every leaf fits; no code of the caller's runs from here on.
  let end = arena.used;
  for (const leaf of pending) end = Math.ceil(end / ARENA_ALIGNMENT) * ARENA_ALIGNMENT + leaf.bytes.byteLength;
  if (end > arena.capacity) {
    throw new MtcError(Status.MTC_ERR_OUT_OF_MEMORY, `Arena.consolidate: the batch needs ${end - arena.used} bytes, the arena has ${arena.capacity - arena.used} of ${arena.capacity} left`);
  }
  for (const leaf of pending) {
    const made: Tensor | TypedArray = leaf.shape === null
      ? arena.array(leaf.dtype, leaf.bytes.byteLength / DTYPE_SIZE[leaf.dtype])
      : arena.tensor(leaf.dtype, leaf.shape);
    bytesOf(made instanceof Tensor ? made.data : made).set(leaf.bytes);
    leaf.place(made);
  }
  return root[0];
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
export function startArenaCopy(arena: Arena, device: Device, options?: CopyOptions): AsyncCopyHandle<DeviceTensor> {
  if (!(arena instanceof Arena)) {
    const other = otherCopyMark(arena);
    if (other !== undefined) throw otherCopyError(other, undefined, "startArenaCopy: ");
    throw invalidArgument("startArenaCopy: the first argument must be an Arena");
  }
  return startCopy(arena.usedBytes(), device, options) as unknown as AsyncCopyHandle<DeviceTensor>;
}
