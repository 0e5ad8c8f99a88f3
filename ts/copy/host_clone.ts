/**
 * The option `copyHostLeaves`: in a copy to "cpu", each host leaf comes
 * back as a fresh copy (a new typed array of its kind, or a Tensor over
 * one) instead of the input itself. The copy is made on the calling thread
 * when the walk reads the leaf, once, so later changes to the input never
 * show in the result.
 *
 * @module
 */

import { viewBuffer, viewByteLength, viewSlice } from "../base/views.ts";
import { DTYPE_SIZE, type TypedArray } from "../tensor/dtype.ts";
import { elementCount } from "../tensor/shape.ts";
import { constructedShape, constructedSize, type Tensor, trustedTensor } from "../tensor/tensor.ts";
import { checkReadable, reassignedShape, shapeMismatch } from "./describe.ts";
import type { Frame } from "./traversal.ts";

/**
 * A fresh copy of a bare typed array at (parent, key): its kind, its
 * elements, a buffer of its own. An empty one is checked as startCopy
 * checks it: released, detached or out of bounds is an MtcError with the
 * path (slicing it would be a bare TypeError).
 */
export function cloneArray(data: TypedArray, parent: Frame | null, key: unknown): TypedArray {
  if (viewByteLength(data) === 0) checkReadable(parent, key, data, viewBuffer(data));
  return viewSlice(data);
}

/**
 * A fresh copy of a dense Tensor at (parent, key): its data, dtype and
 * shape read once and checked against each other, as a copy to a device
 * checks them (MtcError with the path otherwise).
 */
export function cloneTensor(leaf: Tensor, parent: Frame | null, key: unknown): Tensor {
  const data = leaf.data; // read once: a getter may give another array each time
  const dtype = leaf.dtype;
  let shape = leaf.shape;
  let elements: number;
  if (shape === constructedShape(leaf)) elements = constructedSize(leaf);
  else {
    shape = reassignedShape(shape, parent, key);
    elements = elementCount(shape);
  }
  const bytes = viewByteLength(data);
  if (bytes !== elements * DTYPE_SIZE[dtype]) throw shapeMismatch(parent, key, data, shape, dtype, elements);
  if (bytes === 0) checkReadable(parent, key, data, viewBuffer(data)); // no elements: released or detached?
  return trustedTensor(viewSlice(data), shape, dtype);
}
