/**
 * Strided tensors of every dtype and kind of layout, and their dense image
 * computed one element at a time, for the strided copy tests (tests/ts and
 * tests/gpu).
 *
 * @module
 */

import { type DType, DTYPES, Tensor, type TypedArray } from "../../ts/mod.ts";
import { assert, assertSame } from "./harness.ts";
import { elementSize, randomLeaf } from "./random_tensors.ts";

/** packThresholdBytes of the copies of {@link batch}: its small tensors are under it, its large ones over. */
export const THRESHOLD = 16 << 10;

/** `n` random elements of `dtype` in storage of their own. */
function storage(dtype: DType, n: number, seed: number): TypedArray {
  const leaf = randomLeaf(dtype, [n], seed);
  return leaf instanceof Tensor ? leaf.data : leaf;
}

/** The dense, row-major bytes of a strided tensor, one element at a time. */
export function denseImage(t: Tensor): Uint8Array {
  const es = elementSize(t.dtype);
  const src = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  const shape = t.shape;
  const strides = t.strides ?? shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const out = new Uint8Array(t.size * es);
  const index = new Array<number>(shape.length).fill(0);
  for (let e = 0; e < t.size; e++) {
    let at = t.offset;
    for (let d = 0; d < shape.length; d++) at += index[d]! * strides[d]!;
    out.set(src.subarray(at * es, at * es + es), e * es);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++index[d]! < shape[d]!) break;
      index[d] = 0;
    }
  }
  return out;
}

function bytesOfData(data: TypedArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** The strided tensors of one dtype, of about `n` elements each. */
function layouts(dtype: DType, n: number, seed: number): Record<string, Tensor> {
  const side = Math.max(2, Math.round(Math.sqrt(n)));
  const rows = side + 1, cols = side - 1;
  const matrix = storage(dtype, rows * (cols + 3), seed);
  const [a, b, c, d, e] = [2, 3, 4, 5, Math.max(1, Math.ceil(n / 120))];
  return {
    // [cols, rows] read from a [rows, cols + 3] matrix by its columns
    transpose: new Tensor(matrix, [cols, rows], dtype, { strides: [1, cols + 3] }),
    column_slice: new Tensor(matrix, [rows, cols - 1], dtype, { strides: [cols + 3, 1], offset: 2 }),
    // every other row and every third column of a [2 * side + 1, 3 * side] matrix
    step_slice: new Tensor(storage(dtype, (2 * side + 1) * 3 * side, seed + 3), [side + 1, side], dtype, { strides: [6 * side, 3], offset: 1 }),
    broadcast: new Tensor(storage(dtype, cols, seed + 1), [rows, 1, cols], dtype, { strides: [0, 5, 1] }),
    empty: new Tensor(matrix, [rows, 0, 3], dtype, { strides: [1, 7, 2], offset: 4 }),
    five_d: new Tensor(storage(dtype, a * b * c * d * e + 3, seed + 2), [b, a, e, d, c], dtype, {
      strides: [c * d * e, b * c * d * e, 1, c * e, e],
      offset: 3,
    }),
  };
}

/** Every dtype's strided tensors, small and large, as { "float32 transpose small": Tensor, ... }. */
export function batch(): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  DTYPES.forEach((dtype, i) => {
    const small = Math.floor(THRESHOLD / 4 / elementSize(dtype)); // well under the threshold
    const large = Math.ceil((THRESHOLD * 3) / elementSize(dtype)); // well over it
    for (const [size, n] of [["small", small], ["large", large]] as const) {
      for (const [kind, t] of Object.entries(layouts(dtype, n, 100 * i + n))) {
        if (t.size > 0) assertSame(t.byteLength <= THRESHOLD, size === "small", `${dtype} ${kind} ${size}: ${t.byteLength} bytes`);
        out[`${dtype} ${kind} ${size}`] = t;
      }
    }
  });
  return out;
}

/** Fails unless `got` is a dense Tensor with `input`'s shape, dtype and elements. */
export function checkDense(got: Tensor | TypedArray, input: Tensor, name: string): void {
  assert(got instanceof Tensor, `${name}: a Tensor comes back`);
  assertSame(got.strides, undefined, `${name}: the copy is dense`);
  assertSame(got.shape.join(","), input.shape.join(","), `${name}: shape`);
  assertSame(got.dtype, input.dtype, `${name}: dtype`);
  const expected = denseImage(input);
  const actual = bytesOfData(got.data);
  assertSame(actual.length, expected.length, `${name}: bytes`);
  for (let k = 0; k < actual.length; k++) if (actual[k] !== expected[k]) assertSame(actual[k], expected[k], `${name}: byte ${k}`);
}

