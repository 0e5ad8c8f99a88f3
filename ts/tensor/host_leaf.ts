/**
 * What a DeviceTensor comes back to the host as, and the dtype that says.
 *
 * @module
 */

import type { DType, TypedArray } from "./dtype.ts";
import type { HostArrayFor, NaturalDType } from "./dtype_arrays.ts";
import type { Tensor } from "./tensor.ts";

/**
 * What a DeviceTensor comes back as from a copy to the host: a typed array
 * (a 1-D tensor of a dtype that has one) or a {@link Tensor}.
 */
export type HostLeaf = TypedArray | Tensor;

/**
 * What a tensor of dtype `D` of unknown origin (`DeviceTensor.empty`)
 * comes back as from the device: a Tensor of that dtype, or for a 1-D
 * tensor of a dtype that a typed array kind stands for, that array.
 */
export type HostLeafFor<D extends DType> = DType extends D ? HostLeaf : Tensor<D> | HostArrayFor<D>;

/**
 * The dtype of a DeviceTensor that comes back as `H`: a `Tensor<D>`'s `D`,
 * a bare array's natural dtype (Float32Array: "float32"), else any.
 */
export type DTypeOf<H extends HostLeaf> = H extends Tensor<infer D, infer _A> ? D
  : H extends TypedArray ? NaturalDType<H>
  : DType;
