/**
 * Host tensors: typed array storage with a shape and a dtype.
 *
 * @module
 */

import type { DataFor } from "./dtype_arrays.ts";
import {
  type DType,
  DTYPE_SIZE,
  dtypeOf,
  isDType,
  storageFits,
  type StorageFor,
  storageKinds,
  type TypedArray,
  typedArrayKind,
  valuesPerElement,
} from "./dtype.ts";
import { checkOptionNames, invalidArgument, showValue } from "../base/errors.ts";
import { defineInspect } from "../base/inspect.ts";
import { markClass } from "../base/copy_identity.ts";
import { bufferUnder, viewByteLength } from "../base/views.ts";
import { frozenShape, shapeEntries, showShape, tooLarge } from "./shape.ts";
import { denseStrides, isDenseLayout, layoutProblem, type TensorLayout } from "./strides.ts";

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
 *
 * `D` is the dtype and `A` the kind of its data, as far as types know them:
 * `Tensor<"float32">`'s data is a Float32Array, `new Tensor(new Int8Array(4),
 * [2, 2])`'s an Int8Array; a plain `Tensor` may hold any of them.
 *
 * The fields describe the caller's memory and may be changed after
 * construction (they are readonly only by type; a `data` getter, for a
 * tensor made lazily, is fine): each copy reads `data`, `shape`, `dtype`,
 * `strides` and `offset` once and checks them against each other and
 * against the array's length (startCopy: as the engine keeps it, whatever
 * the array's own properties say). `size` and `byteLength` say what the
 * constructor found.
 *
 * A strided tensor reads its elements from anywhere in `data`: give its
 * layout (strides and offset in elements). Copies of it are dense.
 *
 * @example
 * ```ts
 * const image = new Float32Array(480 * 640 * 3);            // H x W x C
 * const chw = new Tensor(image, [3, 480, 640], "float32", { strides: [1, 1920, 3] });
 * const everyOtherRow = new Tensor(image, [240, 640, 3], "float32", { strides: [3840, 3, 1] });
 * ```
 */
export class Tensor<D extends DType = DType, A extends DataFor<D> = DataFor<D>> {
  /**
   * The elements, row-major; for a strided tensor, the storage its layout
   * reads. The copy reads exactly these bytes (a strided one: the elements
   * its layout names).
   */
  readonly data: A;
  /**
   * Extent of each dimension; [] is a scalar (one element). Frozen: tensors
   * of one shape may share the array, and copies share it with their source.
   */
  readonly shape: readonly number[];
  /** The element type. */
  readonly dtype: D;
  /** Number of elements (the product of the shape), fixed at construction. */
  readonly size: number;
  /**
   * Strides in elements, one per dimension, when the tensor is strided;
   * undefined for a dense one (a layout given with the strides of its shape
   * is dense). Frozen.
   */
  readonly strides: readonly number[] | undefined;
  /** Index in `data` of the first element: 0 unless strided. */
  readonly offset: number;
  #shape: readonly number[];
  #size: number;

  /**
   * Throws MtcError (MTC_ERR_INVALID_ARGUMENT) when `data` is not a typed
   * array that can store `dtype`, or when the shape does not describe
   * exactly the elements `data` holds (`data.length`, halved for the
   * complex dtypes, whose arrays must then have an even length). With
   * `layout`, `data` may be larger: the error is then for strides that
   * are not integers >= 0 (one per dimension), an offset that is not an
   * integer >= 0, and a layout that reads outside `data`. A dense layout
   * (the strides of the shape) keeps `data.subarray(offset, offset + size)`
   * as a dense tensor's data.
   */
  constructor(data: A, shape: readonly number[], dtype?: D, layout?: TensorLayout) {
    if (trusting) {
      // Made by a copy from data it laid out itself: nothing to check, and
      // the shape is the source's own frozen array. Same fields, same order.
      this.data = data;
      this.shape = this.#shape = shape;
      this.dtype = dtype!;
      this.size = this.#size = data.length / valuesPerElement(dtype!);
      this.strides = undefined;
      this.offset = 0;
      return;
    }
    const kind = typedArrayKind(data);
    if (kind === undefined) {
      throw invalidArgument(`Tensor data must be a typed array, got ${describe(data)}`);
    }
    const resolved = dtype ?? dtypeOf(data);
    if (!isDType(resolved)) {
      throw invalidArgument(`unknown dtype ${showValue(resolved)}`);
    }
    if (!storageFits(resolved, kind)) {
      throw invalidArgument(
        `a ${kind} cannot store dtype ${resolved} (use ${storageKinds(resolved).join(" or ")})`,
      );
    }
    if (!Array.isArray(shape)) {
      throw invalidArgument(`Tensor shape must be an array of integers, got ${showValue(shape)}`);
    }
    shape = shapeEntries(shape) as number[]; // each extent read once: what is checked is what is kept
    let count = 1;
    for (const extent of shape) {
      if (!Number.isSafeInteger(extent) || extent < 0) {
        throw invalidArgument(`invalid shape ${showShape(shape)}: extents must be integers >= 0`);
      }
      count *= extent;
    }
    // A broadcast layout (stride 0) can name more elements than any storage holds.
    const large = tooLarge(shape, resolved, count, DTYPE_SIZE[resolved]);
    if (large !== null) throw invalidArgument(large);
    let strides: readonly number[] | undefined;
    let offset = 0;
    if (layout === undefined) {
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
    } else {
      checkOptionNames(layout, LAYOUT_FIELDS, "Tensor: ", "the layout", "layout field");
      // Read once, like the shape: what is checked is what is kept.
      const given = layout.strides;
      const checked = given === undefined ? denseStrides(shape) : Array.isArray(given) ? given.slice() : given;
      offset = layout.offset ?? 0;
      const elementSize = DTYPE_SIZE[resolved];
      const problem = layoutProblem(shape, count, checked, offset, Math.floor(data.byteLength / elementSize));
      if (problem !== null) throw invalidArgument(problem);
      if (count === 0 || isDenseLayout(shape, checked)) {
        const lanes = elementSize / (data as Uint8Array).BYTES_PER_ELEMENT; // storage elements per element
        data = (data as Uint8Array).subarray(offset * lanes, (offset + count) * lanes) as unknown as A;
        offset = 0;
      } else strides = Object.freeze(checked);
    }
    this.data = data;
    // Frozen once here, so that copies can share it without copying it.
    this.shape = this.#shape = frozenShape(shape);
    this.dtype = resolved as D;
    this.size = this.#size = count;
    this.strides = strides;
    this.offset = offset;
  }

  static {
    markClass(this, "Tensor");
    constructedShape = (tensor) => (#shape in tensor ? tensor.#shape : undefined);
    constructedSize = (tensor) => tensor.#size;
    // console.log: "Tensor(float32 [2, 3] cpu) [0, 1, 2, 3, 4, 5]", the first values of its data.
    defineInspect<Tensor>(this.prototype, "Tensor", (t) => showTensor(t));
  }

  /** Bytes the tensor occupies (elements × element size); a strided one, its dense copy. */
  get byteLength(): number {
    return this.#size * DTYPE_SIZE[this.dtype];
  }

  /**
   * True once the library's memory under `data` was given back: a
   * {@link pinnedTensor} disposed, a pinned output of a copy to "cpu"
   * released (`dispose()`, `releaseHostOutput`, `disposeAll`), a tensor of
   * an `Arena` after its `reset()` or `dispose()`, a `fromDLPack` import
   * released. Its `data` is then empty (length 0, its buffer detached), its
   * shape and dtype are still what they were, and a copy of it (`startCopy`
   * to a device, `copyInto`, `copyHostLeaves`) is an MtcError saying that
   * its memory was released. Always false for a tensor over memory of your
   * own, detached or not.
   *
   * @example
   * ```ts
   * const t = pinnedTensor("float32", [2, 3]);
   * t.dispose();
   * t.disposed;    // true
   * t.data.length; // 0
   * ```
   */
  get disposed(): boolean {
    return releasedData(this.data, "") !== undefined;
  }

  /**
   * Gives the library's pinned memory under this tensor back now: a
   * {@link pinnedTensor}'s, or a pinned output of a copy to "cpu" (every
   * view of that block becomes empty, as with `releaseHostOutput`). Its data
   * is then empty (length 0) and {@link disposed} is true. A tensor over
   * memory of your own, or from an `Arena` (the arena owns it: `reset()` or
   * dispose the arena), is left alone. Idempotent.
   */
  dispose(): void {
    disposeHook?.(this);
  }

  /** `using t = pinnedTensor(...)`: {@link Tensor.dispose} at the end of the scope. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** Memory of the library's (pinned blocks, DLPack imports) given back, by its ArrayBuffer: what it was and what gives it back. */
const released = new WeakMap<ArrayBufferLike, { readonly what: string; readonly how: string }>();

/**
 * @internal Marks `buffer` (just detached) as memory of the library's that
 * was given back: `what` it was ("pinned memory") and `how` it is given
 * back, for the errors of copies of its views.
 */
export function markReleased(buffer: ArrayBufferLike, what: string, how: string): void {
  released.set(buffer, { what, how });
}

/**
 * @internal When `data` is a view of memory of the library's that was given
 * back: why it cannot be copied, starting with `whose` ("the Tensor's
 * pinned memory was released (...)"); else undefined. Only an empty typed
 * array is looked up (a released one is detached), so a live leaf costs
 * one length read.
 */
export function releasedData(data: unknown, whose: string): string | undefined {
  if (viewByteLength(data) !== 0) return undefined;
  return releasedMemory(bufferUnder(data)!, whose);
}

/**
 * @internal {@link releasedData} for the buffer of an empty typed array
 * already read (a copy's record of a leaf): why it cannot be copied, or
 * undefined when it is no memory of the library's given back.
 */
export function releasedMemory(buffer: ArrayBufferLike, whose: string): string | undefined {
  const gone = released.get(buffer);
  if (gone === undefined) return undefined;
  return `${whose}${whose === "" ? "" : " "}${gone.what} was released (${gone.how}); it cannot be copied`;
}

/** What Tensor#dispose does: set by host_output.ts (which imports this file). */
let disposeHook: ((tensor: Tensor) => unknown) | null = null;
/** Whether a Tensor's data lies in pinned memory of the library's, for console.log: set with disposeHook. */
let pinnedData: (data: unknown) => boolean = () => false;

/** @internal Sets what Tensor#dispose does, and how a Tensor's data is found pinned. */
export function setTensorDisposeHook(hook: (tensor: Tensor) => unknown, isPinned: (data: unknown) => boolean): void {
  disposeHook = hook;
  pinnedData = isPinned;
}

const LAYOUT_FIELDS: readonly string[] = ["strides", "offset"];

/** True only inside {@link trustedTensor}. */
let trusting = false;

/**
 * @internal A Tensor made by the library from storage it made to fit `shape`
 * (frozen) and `dtype` (a copy's host outputs, by the hundred): the checks
 * and the shape copy of the public constructor are skipped.
 */
export function trustedTensor<D extends DType>(data: TypedArray, shape: readonly number[], dtype: D): Tensor<D, StorageFor<D>> {
  trusting = true;
  const tensor = new Tensor(data as StorageFor<D>, shape, dtype);
  trusting = false;
  return tensor;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return (value as object).constructor?.name ?? "object";
  return typeof value;
}

/** How many values of a Tensor's data console.log shows. */
const SHOWN_VALUES = 8;

/** A Tensor for console.log, from its fields as they are now (they are the caller's: each read is checked). */
function showTensor(t: Tensor): string {
  const { data, shape, dtype, strides } = t;
  const dims = Array.isArray(shape) ? showShape(shape) : showValue(shape);
  const layout = strides === undefined ? "" : `, strided ${Array.isArray(strides) ? showShape(strides) : showValue(strides)}`;
  const where = viewByteLength(data) > 0 && pinnedData(data) ? "cpu, pinned" : "cpu";
  const head = `Tensor(${typeof dtype === "string" ? dtype : showValue(dtype)} ${dims} ${where}${layout})`;
  if (viewByteLength(data) < 0) return `${head} (data is no typed array)`;
  if (releasedData(data, "") !== undefined) return `${head.slice(0, -1)}, disposed)`;
  if (strides !== undefined) return head; // its storage's values are not its elements
  const values = data as unknown as ArrayLike<number | bigint>;
  const shown: string[] = [];
  for (let i = 0; i < Math.min(values.length, SHOWN_VALUES); i++) {
    const v = values[i];
    shown.push(typeof v === "bigint" ? `${v}n` : String(v));
  }
  return `${head} [${shown.join(", ")}${values.length > SHOWN_VALUES ? `, ... ${values.length - SHOWN_VALUES} more` : ""}]`;
}
