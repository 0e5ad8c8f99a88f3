/**
 * One side of a copyInto leaf pair (the source's leaf or the destination's),
 * read once into a record: a DeviceTensor's private state, or a host leaf
 * read as startCopy reads it (leaf_record.ts). The pair's checks, its two
 * descriptors and the overlap tests use the record, never the leaf again.
 *
 * @module
 */

import { isResizable, viewBuffer, viewByteLength, viewByteOffset } from "../base/views.ts";
import { invalidArgument, invalidState } from "../base/errors.ts";
import { DEVICE_CPU } from "../gpu/device.ts";
import { DeviceTensor, holderOf, isDeviceTensor, notADeviceTensor, tensorAddress, tensorBytes, tensorDevice, tensorDisposed, tensorDType, tensorShape } from "../tensor/device_tensor.ts";
import { DTYPE_SIZE, type DType, isDType, naturalDType, type TypedArray } from "../tensor/dtype.ts";
import { vectorShape } from "../tensor/shape.ts";
import { releasedMemory, Tensor } from "../tensor/tensor.ts";
import { checkFields, type LeafRecord, readTensor, snapshot, stridedView } from "./leaf_record.ts";
import { formatPath, type PathNode } from "./path.ts";
import type { Traversal } from "./traversal.ts";

/**
 * One side of a leaf pair, as read once: everything the checks, the
 * descriptor and the overlap tests use (nothing reads the leaf again).
 * Kept to a few fields: two are made for every leaf pair.
 */
export interface Side {
  /** Host memory: the view the copy reads or writes (undefined for a DeviceTensor). */
  readonly view: TypedArray | undefined;
  /** The view's ArrayBuffer, by the engine's getter (undefined for a DeviceTensor). */
  readonly buffer: ArrayBufferLike | undefined;
  /** -1 (the host) or the DeviceTensor's device. */
  readonly device: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Bytes copied. */
  readonly bytes: number;
  /**
   * The bytes the side spans, [begin, end): a DeviceTensor's addresses, or
   * the view's offsets in its buffer (a strided source's span may be more
   * or fewer bytes than it copies).
   */
  readonly begin: number;
  readonly end: number;
  /** A strided source: its layout in bytes, dimensions of extent 1 left out. */
  readonly layout?: { readonly shape: number[]; readonly byteStrides: number[] };
}

/** A tensor leaf as copyInto sees it, or undefined for anything else. */
export function readSide(v: unknown, node: PathNode | null, key: unknown, role: string): Side | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  if (v instanceof DeviceTensor) return deviceSide(v, node, key, role);
  if (v instanceof Tensor) return tensorSide(v, node, key, role);
  if (ArrayBuffer.isView(v)) {
    const dtype = naturalDType(v);
    if (dtype === undefined) return undefined; // a DataView is no tensor
    // The engine's byte length, never an own `length` or `byteLength` property.
    const bytes = viewByteLength(v);
    if (bytes < 0) throw invalidArgument(`the ${role} claims to be a typed array (by its constructor) but is none`, formatPath(node, key));
    const buffer = viewBuffer(v);
    if (bytes === 0) checkReleased(buffer, `the ${role}'s`, node, key);
    return denseSide(v as TypedArray, buffer, bytes, dtype, vectorShape(bytes / DTYPE_SIZE[dtype]), role);
  }
  return undefined;
}

/** A DeviceTensor, by its private state, never its public getters (a subclass may replace them). */
function deviceSide(v: DeviceTensor, node: PathNode | null, key: unknown, role: string): Side {
  if (!isDeviceTensor(v)) throw notADeviceTensor(formatPath(node, key), `the ${role} is `);
  if (tensorDisposed(v)) throw invalidState(`the ${role} DeviceTensor was disposed`, formatPath(node, key));
  const address = tensorAddress(v);
  const bytes = tensorBytes(v);
  return { view: undefined, buffer: undefined, device: tensorDevice(v), dtype: tensorDType(v), shape: tensorShape(v), bytes, begin: address, end: address + bytes };
}

/** A host Tensor, read once (leaf_record.ts). */
function tensorSide(v: Tensor, node: PathNode | null, key: unknown, role: string): Side {
  const r = readTensor(v, v.strides);
  if (r.bytes === 0) checkReleased(r.buffer!, `the ${role} Tensor's`, node, key);
  checkFields(r, node, key);
  if (r.strides !== undefined) {
    if (role !== "source") {
      throw invalidArgument("the destination is a strided Tensor; copyInto writes dense destinations only", formatPath(node, key));
    }
    if (r.shape !== undefined && r.bytes >= 0 && isDType(r.dtype)) return stridedSource(r, node, key);
  }
  if (r.shape === undefined || r.bytes < 0 || !isDType(r.dtype) || r.bytes !== r.elements * r.elementSize) {
    throw invalidArgument(`the ${role} Tensor's data, shape and dtype do not agree`, formatPath(node, key));
  }
  return denseSide(r.data, r.buffer!, r.bytes, r.dtype, r.shape, role);
}

/** A side in memory of the library's that was given back (a pinned output released, ...): an MtcError saying so. */
function checkReleased(buffer: ArrayBufferLike, whose: string, node: PathNode | null, key: unknown): void {
  const released = releasedMemory(buffer, whose);
  if (released !== undefined) throw invalidState(released, formatPath(node, key));
}

/**
 * A dense host side. A source on a resizable ArrayBuffer is copied from a
 * snapshot of its own, so resizing the caller's buffer while the copy runs
 * cannot pull memory from under it (as startCopy does).
 */
function denseSide(data: TypedArray, buffer: ArrayBufferLike, bytes: number, dtype: DType, shape: readonly number[], role: string): Side {
  if (role === "source" && bytes > 0 && isResizable(buffer)) {
    const copy = snapshot(data);
    return hostSide(copy, viewBuffer(copy), bytes, dtype, shape, bytes);
  }
  return hostSide(data, buffer, bytes, dtype, shape, bytes);
}

/** A host side over `view` (of `buffer`, `viewBytes` long by the engine's getter), copying `bytes`. */
function hostSide(
  view: TypedArray,
  buffer: ArrayBufferLike,
  viewBytes: number,
  dtype: DType,
  shape: readonly number[],
  bytes: number,
): Side {
  const begin = viewByteOffset(view);
  return { view, buffer, device: DEVICE_CPU, dtype, shape, bytes, begin, end: begin + viewBytes };
}

/**
 * A strided source Tensor: the part of its data its layout reads, and the
 * layout in bytes for mtc_plan_set_leaf_layout (as startCopy describes it),
 * checked again here since fields can be reassigned after construction.
 */
function stridedSource(r: LeafRecord, node: PathNode | null, key: unknown): Side {
  const { view, bytes, layout } = stridedView(r, node, key);
  const side = hostSide(view, viewBuffer(view), viewByteLength(view), r.dtype, r.shape!, bytes);
  return layout === undefined ? side : { ...side, layout };
}

/** A DeviceTensor's block lives until the copy is over: the traversal holds a share. Returns the mtc_block, or 0. */
export function share(t: Traversal, tensor: unknown): number {
  const holder = tensor instanceof DeviceTensor ? holderOf(tensor) : null;
  if (holder === null) return 0;
  holder.acquire();
  t.shares.push(holder);
  return holder.block;
}

/** Where a side's bytes are: its ArrayBuffer, or its device. */
export function spaceOf(side: Side): unknown {
  return side.buffer ?? side.device;
}

export function overlaps(a: Side, b: Side): boolean {
  return spaceOf(a) === spaceOf(b) && a.begin < b.end && b.begin < a.end;
}
