// The result types say what a copy gives at run time (issue 26, 7 and 13b):
// each assignment below compiles under tsc and deno check only if the types
// are right, and each assertion checks that run time agrees.
import {
  Arena,
  DeviceTensor,
  disposeAll,
  type DType,
  DTYPES,
  type HostLeaf,
  pinnedTensor,
  startArenaCopy,
  startCopy,
  Stream,
  Tensor,
  type TypedArray,
} from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, test } from "./harness.ts";

const typesTest = (name: string, fn: () => void | Promise<void>) => test(`result types: ${name}`, fn, { skip: skipWithoutDriver });

/** Compiles only when `A` and `B` are the same type. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const same = <A, B>(_proof: Same<A, B>): void => {};

typesTest("a round trip to cpu gives back what went in: a Tensor as a Tensor, an array as its kind", async () => {
  const batch = {
    vector: new Tensor(new Float32Array([1, 2, 3]), [3]), // 1-D: a Tensor all the same
    matrix: new Tensor(new Int8Array(4), [2, 2]),
    bare: new Float32Array([4, 5]),
    clamped: new Uint8ClampedArray([6]),
    big: new BigInt64Array([7n]),
    name: "x",
  };
  const onGpu = await startCopy(batch, "cuda:0");
  same<typeof onGpu.vector, DeviceTensor<Tensor>>(true);
  same<typeof onGpu.bare, DeviceTensor<Float32Array<ArrayBuffer>>>(true);
  same<typeof onGpu.clamped, DeviceTensor<Uint8Array<ArrayBuffer>>>(true);
  const onOther = await startCopy(onGpu, "cuda:1"); // GPU to GPU keeps what it comes back as
  same<typeof onOther.vector, DeviceTensor<Tensor>>(true);
  const back = await startCopy(onOther, "cpu");
  same<typeof back.vector, Tensor>(true);
  same<typeof back.matrix, Tensor>(true);
  same<typeof back.bare, Float32Array<ArrayBuffer>>(true);
  same<typeof back.clamped, Uint8Array<ArrayBuffer>>(true);
  same<typeof back.big, BigInt64Array<ArrayBuffer>>(true);
  same<typeof back.name, string>(true);
  assert(back.vector instanceof Tensor, "a 1-D Tensor comes back a Tensor");
  assertEquals(back.vector.shape, [3]);
  assertEquals(Array.from(back.vector.data as Float32Array), [1, 2, 3]);
  assert(back.matrix instanceof Tensor);
  assert(back.bare instanceof Float32Array);
  assertEquals(Array.from(back.bare), [4, 5]);
  assertSame(back.clamped.constructor, Uint8Array, "uint8 comes back as a Uint8Array");
  assert(back.big instanceof BigInt64Array);
  // toHost() too, typed by what the tensor was copied from.
  const vector: Tensor = onGpu.vector.toHost();
  const bare: Float32Array = onGpu.bare.toHost();
  assert(vector instanceof Tensor && bare instanceof Float32Array);
  disposeAll([onGpu, onOther, back]);
});

typesTest("tensors of unknown origin come back by their shape and dtype", async () => {
  using empty = DeviceTensor.empty([2], "float32", "cuda:0");
  same<ReturnType<typeof empty.toHost>, Float32Array<ArrayBuffer> | Tensor<"float32">>(true);
  const dtype: DType = DTYPES[0]!; // known only at run time
  using any = DeviceTensor.empty([2], dtype, "cuda:0");
  same<ReturnType<typeof any.toHost>, HostLeaf>(true);
  const host = empty.toHost();
  assert(host instanceof Float32Array, "1-D float32: a Float32Array");
  using square = DeviceTensor.zeros([2, 2], "float32", "cuda:0");
  assert(square.toHost() instanceof Tensor);
  const back = await startCopy({ t: empty, any }, "cpu");
  same<typeof back.t, Float32Array<ArrayBuffer> | Tensor<"float32">>(true);
  same<typeof back.any, HostLeaf>(true);
  disposeAll(back);
});

typesTest("a dtype named in the call types the data (issue 35): pinned, arena and device tensors", async () => {
  const x = new Float32Array(400).fill(1.5);
  using arena = Arena.create(1 << 16);
  const boxes = arena.tensor("float32", [100, 4]);
  boxes.data.set(x); // a Float32Array's set: no cast
  same<typeof boxes.data, Float32Array>(true);
  same<typeof boxes.dtype, "float32">(true);
  using ids = pinnedTensor("int64", [3]);
  ids.data.fill(7n);
  same<typeof ids.data, BigInt64Array>(true);
  using sevens = pinnedTensor("int32", [2, 2]);
  sevens.data.fill(7);
  assertEquals(Array.from(sevens.data), [7, 7, 7, 7]);
  // A Tensor made from an array keeps the array's kind; with a dtype, that dtype.
  const mine = new Tensor(new Int16Array(4), [2, 2]);
  same<typeof mine.data, Int16Array<ArrayBuffer>>(true);
  const flags = new Tensor(new Uint8Array(2), [2], "bool");
  same<typeof flags.dtype, "bool">(true);
  const plain: Tensor = flags; // every Tensor is a Tensor
  same<typeof plain.data, TypedArray>(true);
  // On the device and back, the dtype goes along.
  const onGpu = await startCopy({ boxes, flags, bare: new Float64Array(2) }, "cuda:0");
  same<typeof onGpu.boxes, DeviceTensor<Tensor<"float32">>>(true);
  same<typeof onGpu.boxes.dtype, "float32">(true);
  same<typeof onGpu.bare.dtype, "float64">(true);
  const back = onGpu.boxes.toTensor();
  same<typeof back.data, Float32Array>(true);
  assertEquals(Array.from(back.data.subarray(0, 2)), [1.5, 1.5]);
  using zeros = DeviceTensor.zeros([3], "int8", "cuda:0");
  same<typeof zeros.dtype, "int8">(true);
  assertSame(zeros.dtype, "int8");
  disposeAll(onGpu);
  await arena.reset();
});

typesTest("startArenaCopy: a DeviceTensor to a GPU, the used bytes as a Uint8Array to cpu", async () => {
  using arena = Arena.create(1 << 12);
  arena.array("int32", 4).fill(9);
  const toGpu = await startArenaCopy(arena, "cuda:0");
  same<typeof toGpu, DeviceTensor>(true);
  assert(toGpu instanceof DeviceTensor, "a DeviceTensor on the GPU");
  toGpu.dispose();
  const toHost = await startArenaCopy(arena, "cpu");
  same<typeof toHost, Uint8Array<ArrayBuffer>>(true);
  assert(toHost instanceof Uint8Array && toHost[0] === 9, `the used bytes on the host: ${toHost}`);
  disposeAll(toHost);
  await arena.reset();
});

typesTest("the library's objects and other known classes are typed as passing through", async () => {
  using stream = Stream.create("cuda:0");
  const error = new Error("e");
  const out = await startCopy({ stream, error, when: new Date(0), x: new Float32Array(1) }, "cuda:0");
  same<typeof out.stream, Stream>(true);
  same<typeof out.error, Error>(true);
  assertSame(out.stream, stream);
  assertSame(out.error, error);
  disposeAll(out);
});
