// Disposed objects do not look alive (issue 26, item 8): reading the address
// or data of a disposed object of the library's is an MtcError that says it
// was disposed, and copying released memory is an MtcError naming the leaf
// and the release, while shape, dtype and `disposed` stay readable. Every
// use after dispose has one code, MTC_ERR_INVALID_STATE (issue 35, item 8):
// use_after_dispose.test.ts has the paths this file does not.
// Emulated driver. fromDLPack's host imports: dlpack.test.ts.
import { KERNELS_PTX } from "../../examples/kernel_ptx.ts";
import {
  Arena,
  copyInto,
  DeviceTensor,
  disposeAll,
  MtcError,
  Module,
  pinnedArray,
  pinnedTensor,
  releaseHostOutput,
  startCopy,
  Stream,
  Tensor,
  toDLPack,
} from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, runner, test } from "./harness.ts";

const disposedTest = (name: string, fn: () => void | Promise<void>) => test(`disposed: ${name}`, fn, { skip: skipWithoutDriver });

type Inspect = (value: unknown) => string;
const g = globalThis as unknown as { Bun?: { inspect: Inspect }; Deno?: { inspect: Inspect } };
const inspect: Inspect = (value) => runner === "bun" ? g.Bun!.inspect(value) : g.Deno!.inspect(value);

const RELEASED = "pinned memory was released (dispose(), releaseHostOutput, disposeAll, or its arena's reset() or dispose()); it cannot be copied";

/** Fails unless `fn` throws an MtcError of `code` whose message is exactly `message`. */
function expectError(fn: () => unknown, code: string, message: string): MtcError {
  const e = assertThrows(fn, MtcError);
  assertSame(e.message, message);
  assertSame(e.code, code);
  return e;
}

/** A pinned output of a copy to "cpu": a Tensor [2, 3] and a bare Int32Array(4), in one pinned block. */
function pinnedOutputs(): { t: Tensor; a: Int32Array } {
  const onGpu = startCopy({ t: new Tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]), a: Int32Array.from([7, 8, 9, 10]) }, "cuda:0").get();
  const back = startCopy(onGpu, "cpu").get();
  disposeAll(onGpu);
  return back as unknown as { t: Tensor; a: Int32Array };
}

disposedTest("a pinned output released: Tensor#disposed, its shape and dtype kept, its data empty and detached", () => {
  const back = pinnedOutputs();
  assertSame(back.t.disposed, false);
  assertEquals(Array.from(back.t.data as Float32Array), [1, 2, 3, 4, 5, 6]);
  assertSame(releaseHostOutput(back), 1, "one block");
  assertSame(back.t.disposed, true);
  assertEquals(back.t.shape, [2, 3]);
  assertSame(back.t.dtype, "float32");
  assertSame(back.t.size, 6, "what the constructor found");
  // What a released bare typed array looks like (it has no `disposed`): length 0, its buffer detached.
  for (const data of [back.t.data, back.a]) {
    assertSame(data.length, 0);
    assertSame(data.byteLength, 0);
    assertSame((data.buffer as ArrayBuffer).detached, true);
  }
  assertSame(inspect(back.t), "Tensor(float32 [2, 3] cpu, disposed)");
});

disposedTest("a released pinned output is an MtcError naming the leaf for startCopy to a device, copyInto and copyHostLeaves", async () => {
  const back = pinnedOutputs();
  disposeAll(back);
  const batch = { cams: [back] };
  // Before: "the Tensor's Float32Array has 0 elements but its shape [2, 3] needs 6 (was its buffer detached or resized?)".
  expectError(() => startCopy(batch, "cuda:1"), "MTC_ERR_INVALID_STATE", `.cams[0].t: the Tensor's ${RELEASED}`);
  // Before: "its ArrayBuffer was detached (transferred or resized away) ...".
  expectError(() => startCopy({ a: back.a }, "cuda:0"), "MTC_ERR_INVALID_STATE", `.a: its ${RELEASED}`);
  // Before: "the source Tensor's data, shape and dtype do not agree", and for bare arrays a shape mismatch ([0] against [4]).
  using dst = DeviceTensor.empty([2, 3], "float32", "cuda:0");
  expectError(() => copyInto({ t: back.t }, { t: dst }), "MTC_ERR_INVALID_STATE", `.t: the source Tensor's ${RELEASED}`);
  expectError(() => copyInto({ a: back.a }, { a: new Int32Array(4) }), "MTC_ERR_INVALID_STATE", `.a: the source's ${RELEASED}`);
  const src = startCopy({ t: new Tensor(new Float32Array(6), [2, 3]), a: new Int32Array(4) }, "cuda:0").get();
  expectError(() => copyInto(src, back), "MTC_ERR_INVALID_STATE", `.t: the destination Tensor's ${RELEASED}`);
  expectError(() => copyInto({ a: src.a }, { a: back.a }), "MTC_ERR_INVALID_STATE", `.a: the destination's ${RELEASED}`);
  // copyHostLeaves to "cpu": before, a bare TypeError from slicing a detached array (and a shape mismatch for the Tensor).
  expectError(() => startCopy(batch, "cpu", { copyHostLeaves: true }), "MTC_ERR_INVALID_STATE", `.cams[0].t: the Tensor's ${RELEASED}`);
  expectError(() => startCopy([back.a], "cpu", { copyHostLeaves: true }), "MTC_ERR_INVALID_STATE", `[0]: its ${RELEASED}`);
  // Without it, host leaves copied to "cpu" are passed through unread, as they are.
  assertSame((await startCopy(batch, "cpu")).cams[0]!.t, back.t);
  disposeAll(src);
});

disposedTest("a pinnedTensor, a pinnedArray and an arena's tensor after dispose or reset", async () => {
  const t = pinnedTensor("int16", [3, 2]);
  const a = pinnedArray("float64", 5);
  t.dispose();
  t.dispose(); // idempotent
  assertSame(t.disposed, true);
  assertEquals(t.shape, [3, 2]);
  assertSame(t.data.length, 0);
  assertSame(releaseHostOutput(a), 1);
  assertSame(a.length, 0);
  expectError(() => startCopy({ t }, "cuda:0"), "MTC_ERR_INVALID_STATE", `.t: the Tensor's ${RELEASED}`);
  expectError(() => startCopy({ a }, "cuda:0"), "MTC_ERR_INVALID_STATE", `.a: its ${RELEASED}`);
  // An empty one too (a pinned tensor of 0 bytes cannot be made under Bun: an empty view of a pinned array):
  // before, 0 bytes copied as if nothing had happened.
  const under = pinnedArray("float32", 8);
  const empty = new Tensor(under.subarray(0, 0), [0, 4]);
  assertSame(empty.disposed, false);
  releaseHostOutput(under);
  assertSame(empty.disposed, true);
  expectError(() => startCopy([empty], "cuda:0"), "MTC_ERR_INVALID_STATE", `[0]: the Tensor's ${RELEASED}`);
  expectError(() => copyInto([empty], [DeviceTensor.empty([0, 4], "float32", "cuda:0")]), "MTC_ERR_INVALID_STATE", `[0]: the source Tensor's ${RELEASED}`);
  // An arena's tensor after the arena's reset: its pinned memory went back with the old views.
  using arena = Arena.create(1 << 16);
  const boxes = arena.tensor("float32", [4, 4]);
  assertSame(boxes.disposed, false);
  await arena.reset();
  assertSame(boxes.disposed, true);
  expectError(() => startCopy({ boxes }, "cuda:0"), "MTC_ERR_INVALID_STATE", `.boxes: the Tensor's ${RELEASED}`);
});

disposedTest("memory of your own is never disposed: a transferred array stays a detached one, as before", () => {
  const own = new Tensor(new Float32Array(6), [2, 3]);
  assertSame(own.disposed, false);
  (own.data.buffer as ArrayBuffer).transfer();
  assertSame(own.disposed, false, "not the library's memory");
  assertThrows(() => startCopy({ own }, "cuda:0"), MtcError, "was its buffer detached or resized?");
  const bare = new Int32Array(4);
  bare.buffer.transfer();
  assertThrows(() => startCopy({ bare }, "cuda:0"), MtcError, "its ArrayBuffer was detached (transferred or resized away)");
});

disposedTest("a DeviceTensor: address, toHost, toTensor, toDLPack and copies say it was disposed; shape, dtype, device stay", () => {
  const t = DeviceTensor.zeros([2, 2], "int32", "cuda:1");
  t.dispose();
  assertSame(t.disposed, true);
  assertEquals(t.shape, [2, 2]);
  assertSame(t.dtype, "int32");
  assertSame(t.device, "cuda:1");
  assertSame(t.byteLength, 16);
  expectError(() => t.address, "MTC_ERR_INVALID_STATE", "DeviceTensor.address: this DeviceTensor (cuda:1) was disposed: its address is no longer valid");
  // One code for every use after dispose, whichever call finds it (toHost and copies gave MTC_ERR_INVALID_ARGUMENT).
  expectError(() => t.toHost(), "MTC_ERR_INVALID_STATE", "(root): this DeviceTensor was disposed and cannot be copied");
  expectError(() => t.toTensor(), "MTC_ERR_INVALID_STATE", "(root): this DeviceTensor was disposed and cannot be copied");
  expectError(() => toDLPack(t), "MTC_ERR_INVALID_STATE", "toDLPack: the DeviceTensor was disposed");
  expectError(() => startCopy({ x: t }, "cuda:0"), "MTC_ERR_INVALID_STATE", ".x: this DeviceTensor was disposed and cannot be copied");
  expectError(() => copyInto({ x: new Int32Array(4) }, { x: t }), "MTC_ERR_INVALID_STATE", ".x: the destination DeviceTensor was disposed");
  expectError(() => copyInto({ x: t }, { x: new Int32Array(4) }), "MTC_ERR_INVALID_STATE", ".x: the source DeviceTensor was disposed");
});

disposedTest("an AsyncCopyHandle: get, await, wait and completionEvent name the call and the disposal; ready() is true, stats() a snapshot", async () => {
  const h = startCopy({ a: new Float32Array(64) }, "cuda:0");
  h.dispose();
  assertSame(h.ready(), true, "documented: nothing is in flight any more");
  const because = "this AsyncCopyHandle was disposed (dispose() released the copy); take the result with get() or await before disposing";
  expectError(() => h.get(), "MTC_ERR_INVALID_STATE", `AsyncCopyHandle.get: ${because}`);
  expectError(() => h.get({ timeoutMs: 5 }), "MTC_ERR_INVALID_STATE", `AsyncCopyHandle.get: ${because}`);
  expectError(() => h.completionEvent(), "MTC_ERR_INVALID_STATE", `AsyncCopyHandle.completionEvent: ${because}`);
  const awaited = await assertRejects(async () => await h, MtcError, `await AsyncCopyHandle: ${because}`);
  assertSame(awaited.code, "MTC_ERR_INVALID_STATE");
  await assertRejects(() => h.wait({ timeoutMs: 5 }), MtcError, `AsyncCopyHandle.wait: ${because}`);
  assertSame(h.stats().leaves, 1, "stats stay readable: taken when the plan was released");
  assertSame(inspect(h), "AsyncCopyHandle(to cuda:0, disposed)");
});

disposedTest("a Stream: handle and every call throw after dispose, owned or wrapped; device and disposed stay", () => {
  const stream = Stream.create("cuda:0");
  const raw = stream.handle;
  assert(raw > 0);
  stream.dispose();
  assertSame(stream.disposed, true);
  assertSame(stream.device, "cuda:0");
  // Before: the destroyed stream's pointer, which may name another stream by then.
  expectError(() => stream.handle, "MTC_ERR_INVALID_STATE", "Stream.handle: this Stream (cuda:0) was disposed");
  const owner = Stream.create("cuda:1");
  const wrapped = Stream.wrap(owner.handle, "cuda:1");
  wrapped.dispose();
  expectError(() => wrapped.handle, "MTC_ERR_INVALID_STATE", "Stream.handle: this Stream (cuda:1) was disposed");
  assert(owner.handle > 0, "disposing a wrapped stream leaves the stream itself alone");
  owner.dispose();
});

disposedTest("a CudaEvent: handle, query, synchronize throw after dispose; disposed stays", () => {
  using stream = Stream.create("cuda:0");
  const event = stream.recordEvent();
  assert(event.handle > 0);
  event.dispose();
  assertSame(event.disposed, true);
  expectError(() => event.handle, "MTC_ERR_INVALID_STATE", "CudaEvent.handle: this CudaEvent was disposed");
  expectError(() => event.query(), "MTC_ERR_INVALID_STATE", "CudaEvent.query: this CudaEvent was disposed");
  expectError(() => stream.waitEvent(event), "MTC_ERR_INVALID_STATE", "Stream.waitEvent: this CudaEvent was disposed");
});

disposedTest("a Module and its Kernel: function and launch name the call and the disposed module", () => {
  using stream = Stream.create("cuda:0");
  const module = Module.load(KERNELS_PTX, "cuda:0");
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  module.dispose();
  assertSame(module.disposed, true);
  assertSame(module.device, "cuda:0");
  assertSame(addOne.name, "add_one_f32");
  expectError(() => module.function("add_one_f32", ["ptr", "u32"]), "MTC_ERR_INVALID_STATE",
    'Module.function("add_one_f32"): this Module (cuda:0) was disposed');
  using x = DeviceTensor.zeros([4], "float32", "cuda:0");
  expectError(() => addOne.launch({ stream, grid: 1, block: 4 }, [x, 4]), "MTC_ERR_INVALID_STATE",
    "add_one_f32.launch: this Module (cuda:0) was disposed");
});
