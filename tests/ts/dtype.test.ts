// dtypes, typed array mapping and host Tensor validation (no library needed).
import { DTYPE_SIZE, dtypeOf, HAS_FLOAT16_ARRAY, isNaturalDType, isTypedArray } from "../../ts/tensor/dtype.ts";
import { type DType, DTYPES, MtcError, Tensor, type TypedArray } from "../../ts/mod.ts";
import { trustedTensor } from "../../ts/tensor/tensor.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const F16 = (globalThis as unknown as { Float16Array?: new (n: number) => TypedArray }).Float16Array;

test("dtype: bare typed arrays map to their natural dtype", () => {
  const cases: [TypedArray, string][] = [
    [new Int8Array(1), "int8"],
    [new Uint8Array(1), "uint8"],
    [new Uint8ClampedArray(1), "uint8"],
    [new Int16Array(1), "int16"],
    [new Uint16Array(1), "uint16"],
    [new Int32Array(1), "int32"],
    [new Uint32Array(1), "uint32"],
    [new BigInt64Array(1), "int64"],
    [new BigUint64Array(1), "uint64"],
    [new Float32Array(1), "float32"],
    [new Float64Array(1), "float64"],
  ];
  if (F16) cases.push([new F16(1), "float16"]);
  for (const [array, dtype] of cases) assertSame(dtypeOf(array), dtype, `${array.constructor.name}`);
});

test("dtype: sizes, and which dtypes come back as plain typed arrays", () => {
  assertEquals(DTYPES.length, 15);
  assertEquals(DTYPES.map((d) => DTYPE_SIZE[d]), [1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16]);
  assert(!isNaturalDType("bool"));
  assert(!isNaturalDType("bfloat16"));
  assert(!isNaturalDType("complex64") && !isNaturalDType("complex128"), "a bare Float32Array is float32, never complex");
  assertSame(isNaturalDType("float16"), HAS_FLOAT16_ARRAY);
  assert(isNaturalDType("int64") && isNaturalDType("float32") && isNaturalDType("uint8"));
});

test("dtype: a DataView is not a typed array", () => {
  assert(!isTypedArray(new DataView(new ArrayBuffer(8))));
  assert(!isTypedArray([1, 2]));
  assert(isTypedArray(new Float64Array(2)));
});

test("Tensor: shape and dtype default from the data", () => {
  const t = new Tensor(new Float32Array(12), [3, 4]);
  assertSame(t.dtype, "float32");
  assertEquals(t.shape, [3, 4]);
  assertSame(t.byteLength, 48);
  const shape = [2, 6];
  const copy = new Tensor(new Float32Array(12), shape);
  shape[0] = 99;
  assertEquals(copy.shape, [2, 6], "the Tensor keeps its own copy of the shape");
  assertSame(new Tensor(new BigInt64Array(2), [2]).dtype, "int64");
  assertSame(new Tensor(new Float64Array(1), []).byteLength, 8, "a scalar has one element");
  assertSame(new Tensor(new Int8Array(0), [0, 5]).byteLength, 0);
});

test("Tensor: the library's unchecked constructor leaves the public one checking", () => {
  const shape = [2, 2];
  const t = trustedTensor(new Uint8Array(4), shape, "bool");
  assert(t instanceof Tensor);
  assertSame(t.shape, shape, "the library's own shape array, shared");
  assertSame(t.size, 4);
  assertSame(t.dtype, "bool");
  assertEquals(Object.keys(t), Object.keys(new Tensor(new Uint8Array(4), [2, 2], "bool")), "the same fields in the same order");
  assertThrows(() => new Tensor(new Float32Array(3), [2, 2]), MtcError, "shape [2, 2] has 4 elements");
});

test("Tensor: the shape is copied", () => {
  const shape = [2, 2];
  const t = new Tensor(new Int32Array(4), shape);
  shape[0] = 9;
  assertEquals(t.shape, [2, 2]);
});

test("Tensor: bool, bfloat16 and float16 storage", () => {
  assertSame(new Tensor(new Uint8Array(3), [3], "bool").byteLength, 3);
  assertSame(new Tensor(new Uint16Array(3), [3], "bfloat16").byteLength, 6);
  assertSame(new Tensor(new Uint16Array(3), [3], "float16").dtype, "float16");
  if (F16) assertSame(new Tensor(new F16(3), [3]).dtype, "float16");
});

test("Tensor: shape product must equal the element count", () => {
  const e = assertThrows(() => new Tensor(new Float32Array(10), [3, 4]), MtcError, "shape [3, 4] has 12 elements but the Float32Array has 10");
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  assertSame(e.status, 2);
  assertSame(e.path, undefined);
  assertThrows(() => new Tensor(new Float32Array(4), [-2, -2]), MtcError, "extents must be integers >= 0");
  assertThrows(() => new Tensor(new Float32Array(4), [2.5, 2]), MtcError, "extents must be integers >= 0");
  assertThrows(() => new Tensor(new Float32Array(4), 4 as unknown as number[]), MtcError, "shape must be an array");
});

test("Tensor: data must be a typed array that can store the dtype", () => {
  // The types refuse what run time refuses (a caller without types gets the MtcError):
  // @ts-expect-error: a Float32Array cannot hold int32
  assertThrows(() => new Tensor(new Float32Array(4), [4], "int32"), MtcError, "a Float32Array cannot store dtype int32");
  // @ts-expect-error: nor an Int8Array bool
  assertThrows(() => new Tensor(new Int8Array(4), [4], "bool"), MtcError, "use Uint8Array or Uint8ClampedArray");
  assertThrows(() => new Tensor(new Uint8Array(4), [4], "complex32" as unknown as DType), MtcError, 'unknown dtype "complex32"');
  assertThrows(() => new Tensor(new Uint8Array(16), [2], "complex64" as DType), MtcError, "a Uint8Array cannot store dtype complex64 (use Float32Array)");
  assertThrows(() => new Tensor(new DataView(new ArrayBuffer(4)) as never, [4]), MtcError, "must be a typed array, got DataView");
  assertThrows(() => new Tensor([1, 2] as never, [2]), MtcError, "must be a typed array, got Array");
});
