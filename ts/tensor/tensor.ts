/**
 * Host tensors: typed array storage with a shape and a dtype.
 *
 * @module
 */

import {
  type DType,
  DTYPE_SIZE,
  dtypeOf,
  isDType,
  storageFits,
  storageKinds,
  type TypedArray,
  typedArrayKind,
  valuesPerElement,
} from "./dtype.ts";
import { invalidArgument } from "../base/errors.ts";
import { frozenShape } from "./shape.ts";

/**
 * @internal The shape a Tensor's constructor froze, or undefined for an
 * object that only claims to be a Tensor (made with Object.create). A copy
 * compares it with `shape` to tell a reassigned or forged field.
 */
export let constructedShape: (tensor: Tensor) => readonly number[] | undefined;
/** @internal The element count the constructor found (with {@link constructedShape}). */
export let constructedSize: (tensor: Tensor) => number;

/**
 * A dense, row-major tensor in host memory: `data` holds exactly
 * `shape.reduce((a, b) => a * b, 1)` elements of `dtype` (for "complex64"
 * and "complex128", twice as many values: real and imaginary interleaved).
 *
 * A bare typed array in a batch is a 1-D tensor of its element type; use a
 * Tensor for other shapes and for "bool", "bfloat16" (Uint16Array storage),
 * "float16" stored as Uint16Array, and the complex dtypes (a bare
 * Float32Array is always float32).
 *
 * @example
 * ```ts
 * const boxes = new Tensor(new Float32Array(30 * 4), [30, 4]);
 * const active = new Tensor(new Uint8Array(30), [30], "bool");
 * const phases = new Tensor(new Float32Array([1, 0, 0, 1]), [2], "complex64"); // 1, i
 * ```
 */
export class Tensor {
  /** The elements, row-major. The copy reads exactly these bytes. */
  readonly data: TypedArray;
  /**
   * Extent of each dimension; [] is a scalar (one element). Frozen: tensors
   * of one shape may share the array, and copies share it with their source.
   */
  readonly shape: readonly number[];
  /** The element type. */
  readonly dtype: DType;
  /** Number of elements (the product of the shape), fixed at construction. */
  readonly size: number;
  #shape: readonly number[];
  #size: number;

  /**
   * Throws MtcError (MTC_ERR_INVALID_ARGUMENT) when `data` is not a typed
   * array that can store `dtype`, or when the shape does not describe
   * exactly the elements `data` holds (`data.length`, halved for the
   * complex dtypes, whose arrays must then have an even length).
   */
  constructor(data: TypedArray, shape: readonly number[], dtype?: DType) {
    if (trusting) {
      // Made by a copy from data it laid out itself: nothing to check, and
      // the shape is the source's own frozen array. Same fields, same order.
      this.data = data;
      this.shape = this.#shape = shape;
      this.dtype = dtype!;
      this.size = this.#size = data.length / valuesPerElement(dtype!);
      return;
    }
    const kind = typedArrayKind(data);
    if (kind === undefined) {
      throw invalidArgument(`Tensor data must be a typed array, got ${describe(data)}`);
    }
    const resolved = dtype ?? dtypeOf(data);
    if (!isDType(resolved)) {
      throw invalidArgument(`unknown dtype ${JSON.stringify(resolved)}`);
    }
    if (!storageFits(resolved, kind)) {
      throw invalidArgument(
        `a ${kind} cannot store dtype ${resolved} (use ${storageKinds(resolved).join(" or ")})`,
      );
    }
    if (!Array.isArray(shape)) {
      throw invalidArgument(`Tensor shape must be an array of integers, got ${describe(shape)}`);
    }
    shape = shape.slice(); // each extent read once: what is checked is what is kept
    let count = 1;
    for (const extent of shape) {
      if (!Number.isSafeInteger(extent) || extent < 0) {
        throw invalidArgument(`invalid shape [${shape.join(", ")}]: extents must be integers >= 0`);
      }
      count *= extent;
    }
    const values = valuesPerElement(resolved);
    if (data.length % values !== 0) {
      throw invalidArgument(
        `a ${resolved} element is ${values} values (real, imaginary), but the ${kind} has an odd length, ${data.length}`,
      );
    }
    if (count !== data.length / values) {
      throw invalidArgument(
        `shape [${shape.join(", ")}] has ${count} elements but the ${kind} has ${data.length / values}` +
          (values === 1 ? "" : ` (${data.length} values, ${values} an element of ${resolved})`),
      );
    }
    this.data = data;
    // Frozen once here, so that copies can share it without copying it.
    this.shape = this.#shape = frozenShape(shape);
    this.dtype = resolved;
    this.size = this.#size = count;
  }

  static {
    constructedShape = (tensor) => (#shape in tensor ? tensor.#shape : undefined);
    constructedSize = (tensor) => tensor.#size;
  }

  /** Bytes the tensor occupies (elements × element size). */
  get byteLength(): number {
    return (this.data.length / valuesPerElement(this.dtype)) * DTYPE_SIZE[this.dtype];
  }
}

/** True only inside {@link trustedTensor}. */
let trusting = false;

/**
 * @internal A Tensor made by the library from storage it made to fit `shape`
 * (frozen) and `dtype` (a copy's host outputs, by the hundred): the checks
 * and the shape copy of the public constructor are skipped.
 */
export function trustedTensor(data: TypedArray, shape: readonly number[], dtype: DType): Tensor {
  trusting = true;
  const tensor = new Tensor(data, shape, dtype);
  trusting = false;
  return tensor;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return (value as object).constructor?.name ?? "object";
  return typeof value;
}
