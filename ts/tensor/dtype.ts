/**
 * Element types: their sizes, which typed arrays may store them, and which
 * dtype a bare typed array stands for.
 *
 * @module
 */

import { viewBuffer, viewByteOffset, viewKind } from "../base/views.ts";

/**
 * The element types a tensor can have. "bool" is stored one byte per value
 * (Uint8Array); "bfloat16" as raw bits in a Uint16Array; "float16" in a
 * Float16Array where the runtime has one, or as raw bits in a Uint16Array;
 * "complex64" and "complex128" as interleaved (real, imaginary) pairs in a
 * Float32Array and a Float64Array, two array values per element.
 */
export type DType =
  | "bool"
  | "int8"
  | "int16"
  | "int32"
  | "int64"
  | "uint8"
  | "uint16"
  | "uint32"
  | "uint64"
  | "float16"
  | "bfloat16"
  | "float32"
  | "float64"
  | "complex64"
  | "complex128";

/** Every typed array kind the library accepts as tensor storage. */
export type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array
  | Float32Array
  | Float64Array
  | Float16ArrayLike;

/**
 * The typed array kind that holds `D` in the library's own storage (pinned
 * tensors, arena arrays, outputs): float16 is a Float16Array where the
 * runtime has one, else a Uint16Array; bfloat16 a Uint16Array; complex
 * dtypes interleaved float arrays; bool a Uint8Array.
 */
export type StorageFor<D extends DType> = {
  bool: Uint8Array;
  int8: Int8Array;
  int16: Int16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  float16: Float16ArrayLike | Uint16Array;
  bfloat16: Uint16Array;
  float32: Float32Array;
  float64: Float64Array;
  complex64: Float32Array;
  complex128: Float64Array;
}[D];

/** A Float16Array, typed structurally because not every TypeScript lib has it. */
export interface Float16ArrayLike extends ArrayBufferView {
  /** Number of elements. */
  readonly length: number;
  /** Always "Float16Array": how a Float16Array is told apart from other views. */
  readonly [Symbol.toStringTag]: "Float16Array";
  /** Element `index`, as a number. */
  [index: number]: number;
}

/** Bytes per element of each dtype. */
export const DTYPE_SIZE: Readonly<Record<DType, number>> = {
  bool: 1,
  int8: 1,
  int16: 2,
  int32: 4,
  int64: 8,
  uint8: 1,
  uint16: 2,
  uint32: 4,
  uint64: 8,
  float16: 2,
  bfloat16: 2,
  float32: 4,
  float64: 8,
  complex64: 8,
  complex128: 16,
};

/**
 * All dtypes, in a stable order (for tests and docs).
 *
 * @example
 * ```ts
 * for (const dtype of DTYPES) console.log(dtype, DTYPE_SIZE[dtype]);
 * ```
 */
export const DTYPES: readonly DType[] = Object.keys(DTYPE_SIZE) as DType[];

/** The dtype a bare typed array of each kind (by its toStringTag) stands for. */
const NATURAL_DTYPE: Readonly<Record<string, DType>> = {
  Int8Array: "int8",
  Uint8Array: "uint8",
  Uint8ClampedArray: "uint8",
  Int16Array: "int16",
  Uint16Array: "uint16",
  Int32Array: "int32",
  Uint32Array: "uint32",
  BigInt64Array: "int64",
  BigUint64Array: "uint64",
  Float16Array: "float16",
  Float32Array: "float32",
  Float64Array: "float64",
};

/** Typed array constructors of this runtime → their kind name (toStringTag). */
const KIND_BY_CONSTRUCTOR = new Map<unknown, string>();
for (const kind of Object.keys(NATURAL_DTYPE)) {
  const constructor = (globalThis as Record<string, unknown>)[kind];
  if (constructor !== undefined) KIND_BY_CONSTRUCTOR.set(constructor, kind);
}

/** Typed array constructors of this runtime → the dtype a bare array of that kind stands for. */
const DTYPE_BY_CONSTRUCTOR = new Map<unknown, DType>();
for (const [constructor, kind] of KIND_BY_CONSTRUCTOR) DTYPE_BY_CONSTRUCTOR.set(constructor, NATURAL_DTYPE[kind]!);

/** Which typed array kinds may hold each dtype (first: the one outputs use). */
const STORAGE: Readonly<Record<DType, readonly string[]>> = {
  bool: ["Uint8Array", "Uint8ClampedArray"],
  int8: ["Int8Array"],
  int16: ["Int16Array"],
  int32: ["Int32Array"],
  int64: ["BigInt64Array"],
  uint8: ["Uint8Array", "Uint8ClampedArray"],
  uint16: ["Uint16Array"],
  uint32: ["Uint32Array"],
  uint64: ["BigUint64Array"],
  float16: ["Float16Array", "Uint16Array"],
  bfloat16: ["Uint16Array"],
  float32: ["Float32Array"],
  float64: ["Float64Array"],
  complex64: ["Float32Array"],
  complex128: ["Float64Array"],
};

/**
 * Typed array values per element: 2 for the complex dtypes (real, imaginary),
 * 1 for the rest. A tensor's element count is its array's length divided by this.
 */
export function valuesPerElement(dtype: DType): number {
  return dtype === "complex64" || dtype === "complex128" ? 2 : 1;
}

interface TypedArrayCtor {
  new (buffer: ArrayBuffer, byteOffset?: number, length?: number): TypedArray;
  readonly BYTES_PER_ELEMENT: number;
}

const globals = globalThis as unknown as Record<string, TypedArrayCtor | undefined>;

/** True where the runtime has a global Float16Array. */
export const HAS_FLOAT16_ARRAY: boolean = typeof globals.Float16Array === "function";

/** The kind of a typed array ("Float32Array", ...), or undefined for anything else (DataView too). */
export function typedArrayKind(value: unknown): string | undefined {
  if (!ArrayBuffer.isView(value)) return undefined;
  // The constructor finds the common case fast (a property lookup with `in`
  // on the table below costs ~0.25 µs a leaf in Bun); toStringTag ("Float32Array"
  // for subclasses too, undefined for DataView) covers the rest.
  const known = KIND_BY_CONSTRUCTOR.get(value.constructor);
  if (known !== undefined) return known;
  const tag = (value as unknown as { [Symbol.toStringTag]?: string })[Symbol.toStringTag];
  return tag !== undefined && tag in NATURAL_DTYPE ? tag : undefined;
}

/**
 * The dtype a bare typed array stands for, or undefined when `view` is no
 * typed array (a DataView). For the walk: one Map lookup for the common
 * kinds, the toStringTag for subclasses.
 */
export function naturalDType(view: ArrayBufferView): DType | undefined {
  const dtype = DTYPE_BY_CONSTRUCTOR.get(view.constructor);
  if (dtype !== undefined) return dtype;
  const kind = typedArrayKind(view);
  return kind === undefined ? undefined : NATURAL_DTYPE[kind];
}

/**
 * Bytes of one element of `view`'s storage as the engine made it (a
 * Float32Array's 4, whatever its own properties say), or undefined when it
 * is no typed array.
 */
export function storageElementBytes(view: unknown): number | undefined {
  const kind = viewKind(view);
  return kind !== undefined && Object.hasOwn(NATURAL_DTYPE, kind) ? DTYPE_SIZE[NATURAL_DTYPE[kind]!] : undefined;
}

/** True when value is a typed array (not a DataView). */
export function isTypedArray(value: unknown): value is TypedArray {
  return typedArrayKind(value) !== undefined;
}

/**
 * The dtype a bare typed array stands for: Float32Array → "float32",
 * BigInt64Array → "int64", Uint8ClampedArray → "uint8", ...
 *
 * @example
 * ```ts
 * dtypeOf(new BigUint64Array(2)); // "uint64"
 * ```
 */
export function dtypeOf(array: TypedArray): DType {
  const dtype = DTYPE_BY_CONSTRUCTOR.get(array.constructor) ?? NATURAL_DTYPE[typedArrayKind(array) ?? ""];
  if (dtype === undefined) throw new TypeError("not a typed array");
  return dtype;
}

/** True when `value` is a dtype name. */
export function isDType(value: unknown): value is DType {
  return typeof value === "string" && Object.hasOwn(DTYPE_SIZE, value);
}

/** True when a typed array of kind `kind` may store elements of `dtype`. */
export function storageFits(dtype: DType, kind: string): boolean {
  return STORAGE[dtype].includes(kind);
}

/**
 * Why a Tensor's `data` (as read) cannot store its `dtype`: an array of
 * another kind put in its place after the constructor checked them, whose
 * bytes would be copied as the dtype. Undefined when it can, and when
 * either is no typed array or dtype (the callers refuse those themselves).
 */
export function storageProblem(data: unknown, dtype: unknown): string | undefined {
  const kind = viewKind(data);
  if (kind === undefined || !isDType(dtype) || storageFits(dtype, kind)) return undefined;
  return `the Tensor's ${kind} cannot store its dtype ${dtype} (a ${storageKinds(dtype).join(" or ")} can; was its data replaced?)`;
}

/** The typed array kinds that may store `dtype`, for error messages. */
export function storageKinds(dtype: DType): readonly string[] {
  return STORAGE[dtype];
}

/**
 * True when a 1-D tensor of this dtype comes back from the device as a plain
 * typed array (its dtype is what that array kind stands for); false for
 * "bool", "bfloat16", the complex dtypes, and "float16" where there is no
 * Float16Array.
 */
export function isNaturalDType(dtype: DType): boolean {
  if (dtype === "bool" || dtype === "bfloat16" || dtype === "complex64" || dtype === "complex128") return false;
  return dtype !== "float16" || HAS_FLOAT16_ARRAY;
}

/**
 * A fresh, zeroed, ArrayBuffer-backed typed array that stores `elements`
 * elements of `dtype` (Float16Array for float16 where available; two values
 * an element for the complex dtypes).
 */
export function allocateStorage(dtype: DType, elements: number): TypedArray {
  return new (storageOf(dtype))(new ArrayBuffer(elements * DTYPE_SIZE[dtype]), 0, elements * valuesPerElement(dtype));
}

/** Per dtype, the first of its storage kinds this runtime has; found once (copies make views by the hundred). */
const STORAGE_CTOR = new Map<DType, TypedArrayCtor>();
for (const dtype of Object.keys(STORAGE) as DType[]) {
  const ctor = STORAGE[dtype].map((kind) => globals[kind]).find((c) => c !== undefined);
  if (ctor !== undefined) STORAGE_CTOR.set(dtype, ctor);
}

function storageOf(dtype: DType): TypedArrayCtor {
  const ctor = STORAGE_CTOR.get(dtype);
  if (ctor === undefined) throw new TypeError(`no storage for ${dtype}`);
  return ctor;
}

/**
 * A typed array of the kind that stores `dtype` (as {@link allocateStorage}
 * picks it) viewing `elements` elements of `buffer` from `byteOffset`, or
 * null when `byteOffset` is not a multiple of the array's value size (for
 * the complex dtypes, that of one part: 4 or 8 bytes).
 */
export function viewStorage(dtype: DType, buffer: ArrayBuffer, byteOffset: number, elements: number): TypedArray | null {
  // Each kind named at its own `new`, as in storageCopy: a view of one known
  // kind costs half as much as one of a constructor looked up at run time.
  switch (dtype) {
    case "float32":
      return byteOffset % 4 === 0 ? new Float32Array(buffer, byteOffset, elements) : null;
    case "complex64":
      return byteOffset % 4 === 0 ? new Float32Array(buffer, byteOffset, elements * 2) : null;
    case "int64":
      return byteOffset % 8 === 0 ? new BigInt64Array(buffer, byteOffset, elements) : null;
    case "bool":
    case "uint8":
      return new Uint8Array(buffer, byteOffset, elements);
    case "int32":
      return byteOffset % 4 === 0 ? new Int32Array(buffer, byteOffset, elements) : null;
    case "float64":
      return byteOffset % 8 === 0 ? new Float64Array(buffer, byteOffset, elements) : null;
    case "complex128":
      return byteOffset % 8 === 0 ? new Float64Array(buffer, byteOffset, elements * 2) : null;
  }
  const ctor = storageOf(dtype);
  if (byteOffset % ctor.BYTES_PER_ELEMENT !== 0) return null;
  return new ctor(buffer, byteOffset, elements * valuesPerElement(dtype));
}

/** The storage of float16 here: Float16Array where the runtime has it, else Uint16Array. */
const FLOAT16_STORAGE: TypedArrayCtor = storageOf("float16");

/**
 * A typed array of the kind that stores `dtype` (as {@link viewStorage}
 * makes it) over `bytes` bytes of `buffer` from `byteOffset` (a multiple of
 * 16), holding a copy of the first `bytes` bytes of `source`: one memcpy.
 * `whole`: `source` holds exactly `bytes` bytes. Each kind is named at its
 * own call below, so that the engines make and fill arrays of one known
 * kind there (a constructor chosen at run time costs twice as much a view).
 */
export function storageCopy(dtype: DType, buffer: ArrayBuffer, byteOffset: number, source: TypedArray, bytes: number, whole: boolean): TypedArray {
  switch (dtype) {
    case "float32":
    case "complex64":
      return filled(Float32Array, buffer, byteOffset, source, bytes, whole);
    case "int64":
      return filled(BigInt64Array, buffer, byteOffset, source, bytes, whole);
    case "bool":
    case "uint8":
      return filled(Uint8Array, buffer, byteOffset, source, bytes, whole);
    case "int32":
      return filled(Int32Array, buffer, byteOffset, source, bytes, whole);
    case "float64":
    case "complex128":
      return filled(Float64Array, buffer, byteOffset, source, bytes, whole);
    case "int8":
      return filled(Int8Array, buffer, byteOffset, source, bytes, whole);
    case "int16":
      return filled(Int16Array, buffer, byteOffset, source, bytes, whole);
    case "uint16":
    case "bfloat16":
      return filled(Uint16Array, buffer, byteOffset, source, bytes, whole);
    case "uint32":
      return filled(Uint32Array, buffer, byteOffset, source, bytes, whole);
    case "uint64":
      return filled(BigUint64Array, buffer, byteOffset, source, bytes, whole);
    case "float16":
      return filled(FLOAT16_STORAGE, buffer, byteOffset, source, bytes, whole);
  }
  throw new TypeError(`no storage for ${dtype}`);
}

function filled(Kind: TypedArrayCtor, buffer: ArrayBuffer, byteOffset: number, source: TypedArray, bytes: number, whole: boolean): TypedArray {
  const copy = new Kind(buffer, byteOffset, bytes / Kind.BYTES_PER_ELEMENT);
  // An array of the copy's kind (as its prototype says) is copied as it is; any other
  // (a Uint8ClampedArray under a bool Tensor) byte for byte: set() would convert its values.
  if (whole && source instanceof Kind) (copy as Uint8Array).set(source as Uint8Array);
  else new Uint8Array(buffer, byteOffset, bytes).set(new Uint8Array(viewBuffer(source), viewByteOffset(source), bytes));
  return copy;
}
