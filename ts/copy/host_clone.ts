/**
 * The option `copyHostLeaves`: in a copy to "cpu", each host leaf comes
 * back as a fresh copy (a new typed array of its kind, or a Tensor over
 * one) instead of the input itself. The copy is made on the calling thread
 * when the walk reads the leaf, once, so later changes to the input never
 * show in the result.
 *
 * @module
 */

import { viewByteLength, viewSlice } from "../base/views.ts";
import type { DType, TypedArray } from "../tensor/dtype.ts";
import { type Tensor, trustedTensor } from "../tensor/tensor.ts";
import { arrayRecord, checkArray, checkDense, readTensor } from "./leaf_record.ts";
import type { Frame } from "./traversal.ts";

/**
 * A fresh copy of a bare typed array of `dtype` (its kind's) at (parent,
 * key): its kind, its elements, a buffer of its own. An empty one is
 * checked as startCopy checks it: released, detached or out of bounds is
 * an MtcError with the path (slicing it would be a bare TypeError).
 */
export function cloneArray(data: TypedArray, dtype: DType, parent: Frame | null, key: unknown): TypedArray {
  const bytes = viewByteLength(data);
  if (bytes <= 0) checkArray(arrayRecord(data, dtype, bytes), parent, key);
  return viewSlice(data);
}

/**
 * A fresh copy of a dense Tensor at (parent, key): its data, dtype and
 * shape read once and checked against each other, as a copy to a device
 * checks them (MtcError with the path otherwise).
 */
export function cloneTensor(leaf: Tensor, parent: Frame | null, key: unknown): Tensor {
  const r = readTensor(leaf, undefined);
  checkDense(r, parent, key);
  return trustedTensor(viewSlice(r.data), r.shape!, r.dtype);
}
