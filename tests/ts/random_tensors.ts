/**
 * Random (seeded) tensors of every dtype, for round-trip tests.
 *
 * @module
 */

import { DTYPE_SIZE, isNaturalDType, valuesPerElement } from "../../ts/tensor/dtype.ts";
import { type DType, DTYPES, Tensor, type TypedArray } from "../../ts/mod.ts";
import { seededRandom } from "../../examples/example_batch.ts";

export { DTYPES };

/** Fills `bytes` with random bytes from `random`. */
export function fillRandom(bytes: Uint8Array, random: () => number): void {
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
}

const STORAGE: Record<DType, new (n: number) => TypedArray> = {
  bool: Uint8Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  float16: ((globalThis as unknown as { Float16Array?: new (n: number) => TypedArray }).Float16Array ?? Uint16Array),
  bfloat16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
  complex64: Float32Array, // (real, imaginary) pairs
  complex128: Float64Array,
};

/**
 * A tensor of `dtype` and `shape` with random contents: a bare typed array
 * when the shape is 1-D and the dtype natural (that is how it comes back),
 * else a Tensor. Bools are 0 or 1; floats are random bit patterns (NaNs
 * included: the copy must keep every bit).
 */
export function randomLeaf(dtype: DType, shape: readonly number[], seed: number): TypedArray | Tensor {
  const random = seededRandom(seed);
  const count = shape.reduce((a, b) => a * b, 1);
  const data = new STORAGE[dtype](count * valuesPerElement(dtype));
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  fillRandom(bytes, random);
  if (dtype === "bool") for (let i = 0; i < bytes.length; i++) bytes[i]! &= 1;
  if (shape.length === 1 && isNaturalDType(dtype)) return data;
  return new Tensor(data, shape, dtype);
}

/** Bytes per element of a dtype. */
export function elementSize(dtype: DType): number {
  return DTYPE_SIZE[dtype];
}

/** The bytes of a host leaf. */
export function bytesOf(leaf: TypedArray | Tensor): Uint8Array {
  const data = leaf instanceof Tensor ? leaf.data : leaf;
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}
