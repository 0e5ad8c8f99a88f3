/**
 * The typed array kinds that go with each dtype, as types: what a Tensor
 * of a dtype may hold, the dtype a bare array stands for, and what a 1-D
 * tensor comes back from a device as.
 *
 * @module
 */

import type { DType, Float16ArrayLike, StorageFor, TypedArray } from "./dtype.ts";

/**
 * The typed array kinds a {@link Tensor} of dtype `D` may hold as its data
 * (what its constructor accepts): {@link StorageFor} and, for "bool" and
 * "uint8", a Uint8ClampedArray too. `DataFor<DType>` is every kind.
 */
export type DataFor<D extends DType> = StorageFor<D> | (D extends "bool" | "uint8" ? Uint8ClampedArray : never);

/**
 * The dtype a bare typed array of kind `A` stands for (Float32Array:
 * "float32", Uint8ClampedArray: "uint8"); `DType` for a union of kinds
 * that names no single one.
 */
export type NaturalDType<A extends TypedArray> = A extends Uint8Array | Uint8ClampedArray ? "uint8"
  : A extends Int8Array ? "int8"
  : A extends Int16Array ? "int16"
  : A extends Uint16Array ? "uint16"
  : A extends Int32Array ? "int32"
  : A extends Uint32Array ? "uint32"
  : A extends BigInt64Array ? "int64"
  : A extends BigUint64Array ? "uint64"
  : A extends Float32Array ? "float32"
  : A extends Float64Array ? "float64"
  : A extends Float16ArrayLike ? "float16"
  : DType;

/**
 * What a copy to the host gives back for a 1-D tensor of dtype `D` as a
 * bare typed array (over an ArrayBuffer), or never for the dtypes that
 * always come back as a Tensor ("bool", "bfloat16", the complex ones).
 */
export type HostArrayFor<D extends DType> = {
  bool: never;
  int8: Int8Array<ArrayBuffer>;
  int16: Int16Array<ArrayBuffer>;
  int32: Int32Array<ArrayBuffer>;
  int64: BigInt64Array<ArrayBuffer>;
  uint8: Uint8Array<ArrayBuffer>;
  uint16: Uint16Array<ArrayBuffer>;
  uint32: Uint32Array<ArrayBuffer>;
  uint64: BigUint64Array<ArrayBuffer>;
  float16: Float16ArrayLike;
  bfloat16: never;
  float32: Float32Array<ArrayBuffer>;
  float64: Float64Array<ArrayBuffer>;
  complex64: never;
  complex128: never;
}[D];
