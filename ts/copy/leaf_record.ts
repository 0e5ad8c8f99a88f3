/**
 * A host leaf as a copy reads it: a Tensor's fields and the engine's
 * measure of its data, each read once into one record, and the checks a
 * copy makes on that record. startCopy (describe.ts), the option
 * copyHostLeaves (host_clone.ts) and copyInto (into_side.ts) read their
 * host leaves here: once the record is made nothing reads the leaf again,
 * so a getter or a Proxy runs once a field whatever is checked, and what
 * is checked is what is copied. (startCopy's common leaf, which one
 * comparison of what was read shows to be good, goes on without a record:
 * an object a leaf cost about 10% of the walk under Bun.)
 *
 * @module
 */

import { invalidArgument, invalidState, type MtcError, showValue } from "../base/errors.ts";
import {
  bufferByteLength,
  isDetached,
  isOutOfBounds,
  isResizable,
  viewBuffer,
  viewByteLength,
  viewElementBytes,
  viewKind,
  viewSlice,
  viewSubarray,
} from "../base/views.ts";
import { type DType, DTYPE_SIZE, isDType, storageProblem, type TypedArray, valuesPerElement } from "../tensor/dtype.ts";
import { areExtents, elementCount, frozenShape, showShape, tooLarge, vectorShape } from "../tensor/shape.ts";
import { byteLayout, denseOffsetProblem, layoutProblem, layoutSpan } from "../tensor/strides.ts";
import { constructedShape, constructedSize, releasedMemory, type Tensor } from "../tensor/tensor.ts";
import { formatPath, type PathNode } from "./path.ts";

/** A host leaf (a Tensor or a bare typed array) as read, once. */
export interface LeafRecord {
  /** The typed array: a Tensor's `data` as read (anything, for a bad one), or the bare array. */
  readonly data: TypedArray;
  /** A Tensor's `dtype` as read (anything, for a bad one), or the dtype a bare array's kind stands for. */
  readonly dtype: DType;
  /** Bytes of one element of `dtype` (for a bad dtype, whatever the table gave: isDType tells). */
  readonly elementSize: number;
  /** The shape, checked and frozen; undefined when the field held no array of integers >= 0. */
  readonly shape: readonly number[] | undefined;
  /** What the shape field held, for messages: the caller's array copied, or the value itself. */
  readonly givenShape: unknown;
  /** Elements the shape names (0 without a shape). */
  readonly elements: number;
  /** The data's byte length, by the engine's getter; -1 when it is no typed array. */
  readonly bytes: number;
  /** The data's ArrayBuffer, by the engine's getter; undefined when it is no typed array. */
  readonly buffer: ArrayBufferLike | undefined;
  /** A strided Tensor's strides (the caller's array copied) and offset, as read; undefined and 0 when dense. */
  readonly strides: unknown;
  readonly offset: unknown;
}

/**
 * Reads a Tensor leaf once: its `strides` come from the caller (which read
 * them to tell dense from strided), then `data`, `dtype`, `shape` and
 * `offset` (0 unless strided: checkDense refuses another).
 */
export function readTensor(leaf: Tensor, strides: unknown): LeafRecord {
  const data = leaf.data; // a getter may give another array each time
  const dtype = leaf.dtype;
  const shape = leaf.shape;
  return tensorRecord(leaf, data, dtype, shape, strides, leaf.offset);
}

/**
 * The record of a Tensor from its fields as read (never read again here).
 * A shape its constructor froze is taken as it is; another (reassigned,
 * forged) is copied, checked and frozen. Nothing is refused yet: the checks
 * below say what is wrong.
 */
export function tensorRecord(leaf: Tensor, data: unknown, dtype: unknown, shape: unknown, strides: unknown, offset: unknown): LeafRecord {
  let checked: readonly number[] | undefined;
  let givenShape = shape;
  let elements = 0;
  if (shape === constructedShape(leaf)) {
    checked = shape as readonly number[];
    elements = constructedSize(leaf);
  } else {
    if (Array.isArray(shape)) givenShape = shape.slice(); // each extent read once
    checked = Array.isArray(givenShape) && areExtents(givenShape) ? frozenShape(givenShape) : undefined;
    if (checked !== undefined) elements = elementCount(checked);
  }
  const bytes = viewByteLength(data);
  return {
    data: data as TypedArray,
    dtype: dtype as DType,
    elementSize: DTYPE_SIZE[dtype as DType],
    shape: checked,
    givenShape,
    elements,
    bytes,
    buffer: bytes < 0 ? undefined : viewBuffer(data as TypedArray),
    strides: Array.isArray(strides) ? strides.slice() : strides,
    offset,
  };
}

/** The record of a bare typed array of `dtype` (the one its kind stands for), a 1-D tensor, whose engine byte length is `bytes`. */
export function arrayRecord(data: TypedArray, dtype: DType, bytes: number): LeafRecord {
  const elementSize = DTYPE_SIZE[dtype];
  const shape = bytes < 0 ? undefined : vectorShape(bytes / elementSize);
  return {
    data,
    dtype,
    elementSize,
    shape,
    givenShape: shape,
    elements: bytes < 0 ? 0 : bytes / elementSize,
    bytes,
    buffer: bytes < 0 ? undefined : viewBuffer(data),
    strides: undefined,
    offset: 0,
  };
}

/** An error about the leaf at (node, key). */
export function leafError(node: PathNode | null, key: unknown, message: string): MtcError {
  return invalidArgument(message, formatPath(node, key));
}

/**
 * Refuses a dense Tensor whose fields disagree (a shape that is no array of
 * integers >= 0, data that does not hold its shape's elements of its
 * dtype) or that only looks readable (see checkReadable).
 */
export function checkDense(r: LeafRecord, node: PathNode | null, key: unknown): void {
  checkNotReleased(r, "the Tensor's", node, key);
  checkFields(r, node, key);
  if (r.shape === undefined) throw leafError(node, key, shapeProblem(r));
  if (r.bytes !== r.elements * r.elementSize) throw leafError(node, key, mismatchProblem(r));
  if (r.bytes === 0) checkReadable(r, node, key);
}

/** Refuses a bare array that is none (a DataView claiming a typed array's constructor) or only looks readable. */
export function checkArray(r: LeafRecord, node: PathNode | null, key: unknown): void {
  if (r.bytes < 0) throw leafError(node, key, "it claims to be a typed array (by its constructor) but is none; a DataView is no tensor");
  if (r.bytes === 0) checkReadable(r, node, key);
}

/**
 * Refuses a leaf on memory of the library's that was given back (a pinned
 * output released, an arena disposed): MTC_ERR_INVALID_STATE, as every use
 * after dispose. Only an empty view is looked up (a released one is).
 */
function checkNotReleased(r: LeafRecord, whose: string, node: PathNode | null, key: unknown): void {
  const released = r.bytes === 0 ? releasedMemory(r.buffer!, whose) : undefined;
  if (released !== undefined) throw invalidState(released, formatPath(node, key));
}

/**
 * Refuses an empty leaf that only looks empty: memory of the library's
 * released, a detached buffer, or a fixed-length view that its resizable
 * ArrayBuffer shrank past (it reads as length 0).
 */
export function checkReadable(r: LeafRecord, node: PathNode | null, key: unknown): void {
  const buffer = r.buffer!;
  checkNotReleased(r, "its", node, key);
  if (isDetached(buffer)) {
    throw leafError(node, key, "its ArrayBuffer was detached (transferred or resized away); a detached array cannot be copied");
  }
  if (isOutOfBounds(r.data)) {
    throw leafError(
      node,
      key,
      `it is out of bounds of its resizable ArrayBuffer, shrunk to ${bufferByteLength(buffer)} bytes after the view was made; ` +
        "an out-of-bounds array cannot be copied",
    );
  }
}

/** What is wrong with a Tensor whose shape field holds no array of integers >= 0: what it holds. */
function shapeProblem(r: LeafRecord): string {
  const given = r.givenShape;
  return `the Tensor's shape ${Array.isArray(given) ? showShape(given) : showValue(given)} is not an array of integers >= 0`;
}

/** Why a Tensor's data and dtype cannot be read at all (no typed array, no dtype), or undefined. */
function unusable(r: LeafRecord): string | undefined {
  if (r.bytes < 0) return "the Tensor's data is not a typed array";
  if (!isDType(r.dtype)) return `the Tensor's dtype ${showValue(r.dtype)} is not one of the dtypes`;
  return undefined;
}

/** What is wrong with a Tensor (with a shape) whose data does not hold what its shape and dtype say. */
function mismatchProblem(r: LeafRecord): string {
  const problem = unusable(r);
  if (problem !== undefined) return problem;
  const kind = viewKind(r.data);
  const length = r.bytes / viewElementBytes(r.data); // the engine's length, never an own property
  const { dtype, elements } = r;
  const values = valuesPerElement(dtype); // 2 for complex: real, imaginary
  if (length % values !== 0) {
    return `the Tensor's ${kind} has an odd length, ${length}, but a ${dtype} element is ${values} values (real, imaginary)`;
  }
  if (length === elements * values) {
    return `the Tensor's ${kind} holds ${r.bytes} bytes but ${elements} elements of ${dtype} take ${elements * DTYPE_SIZE[dtype]}`;
  }
  return `the Tensor's ${kind} has ${length / values} elements but its shape ${showShape(r.shape!)} needs ${elements} ` +
    "(was its buffer detached or resized?)";
}

/** Refuses a strided Tensor whose data, dtype or shape cannot be read (its layout is checked by stridedView). */
export function checkStrided(r: LeafRecord, node: PathNode | null, key: unknown): void {
  checkNotReleased(r, "the Tensor's", node, key);
  const problem = unusable(r);
  if (problem !== undefined) throw leafError(node, key, problem);
  checkFields(r, node, key);
  if (r.shape === undefined) throw leafError(node, key, shapeProblem(r));
}

/**
 * Refuses a Tensor whose fields were changed after its constructor checked
 * them so that a copy would read other bytes than they say: data of a kind
 * that cannot store the dtype (its bytes would be taken as the dtype), or an
 * offset without strides (a dense Tensor's data starts at element 0).
 */
export function checkFields(r: LeafRecord, node: PathNode | null, key: unknown): void {
  const problem = (r.strides === undefined ? denseOffsetProblem(r.offset) : undefined) ?? storageProblem(r.data, r.dtype);
  if (problem !== undefined) throw leafError(node, key, problem);
}

/** What a copy reads of a strided Tensor: the part of its data that its layout reads, and that layout in bytes. */
export interface StridedView {
  /** The span of the data the layout reads (a snapshot of its own on a resizable buffer). */
  readonly view: TypedArray;
  /** Bytes of the dense copy. */
  readonly bytes: number;
  /** The layout for mtc_plan_set_leaf_layout, dimensions of extent 1 left out; undefined when none is left. */
  readonly layout: { readonly shape: number[]; readonly byteStrides: number[] } | undefined;
}

/**
 * The view and layout of a strided Tensor whose data, dtype and shape are
 * good: its layout is checked here against its shape and data (its fields
 * can be reassigned after construction).
 */
export function stridedView(r: LeafRecord, node: PathNode | null, key: unknown): StridedView {
  const shape = r.shape!;
  const elementSize = r.elementSize;
  const strides = r.strides as readonly number[];
  const offset = r.offset as number;
  const large = tooLarge(shape, r.dtype, r.elements, elementSize);
  if (large !== null) throw leafError(node, key, large);
  const problem = layoutProblem(shape, r.elements, strides, offset, Math.floor(r.bytes / elementSize));
  if (problem !== null) throw leafError(node, key, problem);
  const layout = byteLayout(shape, strides, elementSize);
  if (typeof layout === "string") throw leafError(node, key, layout);
  const lanes = elementSize / viewElementBytes(r.data); // storage elements per element
  const [begin, end] = r.elements === 0 ? [offset, offset] : layoutSpan(shape, strides, offset);
  const span = viewSubarray(r.data, begin * lanes, end * lanes);
  // A snapshot of its own: shrinking the caller's buffer while the copy runs gives its pages back at once.
  const view = isResizable(r.buffer!) ? snapshot(span) : span;
  return { view, bytes: r.elements * elementSize, layout: layout.shape.length > 0 ? layout : undefined };
}

/**
 * A copy of `view` on a fixed buffer of its own, for a leaf on a resizable
 * buffer; its .buffer is read (in Bun, that moves a small array's storage
 * out of the moving heap, so that an address read later stays good).
 */
export function snapshot(view: TypedArray): TypedArray {
  const copy = viewSlice(view);
  viewBuffer(copy);
  return copy;
}
