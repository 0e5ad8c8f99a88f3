// The options strict (look-alike tensors refused, naming the path) and
// copyHostLeaves (copies to "cpu" give fresh copies of host leaves): issue
// 26, items 7 and 13d.
import { copyInto, DeviceTensor, disposeAll, MtcError, poolStats, prefetch, startCopy, Tensor } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const cudaTest = (name: string, fn: () => void | Promise<void>) => test(name, fn, { skip: skipWithoutDriver });

class Sample {
  constructor(readonly boxes: Float32Array, readonly name: string) {}
}

/** Fails unless `fn` throws an MtcError at `path` whose message includes `includes`. */
function refused(fn: () => unknown, path: string, includes: string): MtcError {
  const e = assertThrows(fn, MtcError, includes);
  assertSame(e.path, path);
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  return e;
}

for (const device of ["cpu", "cuda:0"] as const) {
  cudaTest(`strict, to ${device}: a class instance holding a tensor is refused, naming where`, () => {
    const batch = { samples: [new Sample(new Float32Array(4), "a")] };
    // Without strict it passes through as it is, uncopied.
    const loose = startCopy(batch, device).get();
    assertSame(loose.samples[0], batch.samples[0]);
    const e = refused(() => startCopy(batch, device, { strict: true }), ".samples[0]", "a Sample instance passes through a copy as it is");
    assert(e.message.includes("it holds a Float32Array at .boxes"), e.message);
    // Deeper, and in a Set, and a DeviceTensor or a Tensor too.
    refused(() => startCopy({ s: new Set([new Tensor(new Int8Array(2), [2])]) }, device, { strict: true }), ".s", "a Set passes through");
    refused(() => startCopy([{ w: new Sample(null as never, "x"), deep: new (class Holder { inner = { list: [new Uint8Array(1)] }; })() }], device, { strict: true }),
      "[0].deep", "it holds a Uint8Array at .inner.list[0]");
    // Objects holding no tensor pass through, strict or not.
    const plain = { when: new Date(0), tag: new Sample(undefined as never, "n"), re: /x/, view: new DataView(new ArrayBuffer(4)) };
    const out = startCopy(plain, device, { strict: true }).get();
    assertSame(out.tag, plain.tag);
    assertSame(out.view, plain.view);
  });

  cudaTest(`strict, to ${device}: a structured-cloned Tensor and an array of numbers are refused`, () => {
    const cloned = structuredClone(new Tensor(new Float32Array(6), [2, 3])); // what postMessage delivers
    assert(!(cloned instanceof Tensor));
    const loose = startCopy({ x: cloned }, device).get() as unknown as { x: { data: unknown; shape: number[] } };
    assertEquals(loose.x.shape, [2, 3], "without strict: walked as a plain object");
    disposeAll(loose);
    refused(() => startCopy({ x: cloned }, device, { strict: true }), ".x", "has a Tensor's fields (data, shape, dtype) but is no Tensor");
    const scalar = structuredClone(new Tensor(new Float64Array(1), []));
    refused(() => startCopy([scalar], device, { strict: true }), "[0]", "structuredClone and postMessage");
    refused(() => startCopy({ a: { b: [1, 2.5, 3] } }, device, { strict: true }), ".a.b", "an array of 3 numbers is no tensor");
    refused(() => startCopy([4], device, { strict: true }), "", "an array of 1 number is no tensor");
    // Mixed arrays, empty arrays and strings are no tensors: fine.
    const fine = startCopy({ ids: [1, "a"], none: [], name: "x" }, device, { strict: true }).get();
    assertEquals(fine, { ids: [1, "a"], none: [], name: "x" });
  });
}

cudaTest("strict: nothing is left behind by a refused copy", () => {
  const before = poolStats();
  const onGpu = startCopy({ t: new Float32Array(8) }, "cuda:0").get();
  refused(() => startCopy({ a: onGpu.t, b: new Sample(new Float32Array(1), "x") }, "cuda:1", { strict: true }), ".b", "Sample");
  refused(() => startCopy({ a: new Float32Array(100), b: [1, 2] }, "cuda:0", { strict: true }), ".b", "numbers");
  disposeAll(onGpu);
  Bun_or_Deno_gc();
  const after = poolStats();
  assertSame(after.plansLive, before.plansLive);
  assertSame(after.blocksLive, before.blocksLive, "the source's block share taken before the refusal was dropped");
});

cudaTest("strict: copyInto refuses what it would skip in the source", async () => {
  const buffers = await startCopy({ a: new Float32Array(2), b: new Float32Array(2) }, "cuda:0");
  const source = { a: new Float32Array([1, 2]), b: new Sample(new Float32Array(2), "x") };
  await copyInto(source, buffers); // without strict: .b skipped
  refused(() => copyInto(source, buffers, { strict: true }), ".b", "a Sample instance");
  // Where the destination is built alike, copyInto would go on without a word.
  const cloned = () => structuredClone(new Tensor(new Float32Array(2), [2]));
  await copyInto({ a: cloned() }, { a: cloned() });
  refused(() => copyInto({ a: cloned() }, { a: cloned() }, { strict: true }), ".a", "no Tensor");
  await copyInto({ a: [1, 2] }, { a: [3, 4] });
  refused(() => copyInto({ a: [1, 2] }, { a: [3, 4] }, { strict: true }), ".a", "an array of 2 numbers");
  disposeAll(buffers);
});

cudaTest("strict in prefetch: the batch's copy fails with the path", async () => {
  const batches = [{ x: new Float32Array(1) }, { x: [1, 2, 3] }];
  const seen: unknown[] = [];
  let error: unknown;
  try {
    for await (const b of prefetch(batches, "cpu", { strict: true })) seen.push(b);
  } catch (e) {
    error = e;
  }
  assertSame(seen.length, 1);
  assert(error instanceof MtcError && error.path === ".x", String(error));
});

test("copyHostLeaves: a copy to cpu gives fresh arrays and Tensors, checked as a copy to a GPU checks them", () => {
  const data = new Float32Array([1, 2, 3, 4]);
  const tensor = new Tensor(new Int16Array([5, 6]), [2]);
  const clamped = new Uint8ClampedArray([7]);
  const batch = { data, tensor, nested: [clamped], name: "x" };
  const same = startCopy(batch, "cpu").get();
  assertSame(same.data, data, "by default host leaves come back as they are");
  const fresh = startCopy(batch, "cpu", { copyHostLeaves: true }).get();
  assert(fresh.data !== data && fresh.data.buffer !== data.buffer);
  assert(fresh.data instanceof Float32Array);
  assertEquals(Array.from(fresh.data), [1, 2, 3, 4]);
  assert(fresh.tensor instanceof Tensor && fresh.tensor !== tensor && fresh.tensor.data !== tensor.data);
  assertEquals(fresh.tensor.shape, [2]);
  assertSame(fresh.tensor.dtype, "int16");
  assertEquals(Array.from(fresh.tensor.data as Int16Array), [5, 6]);
  assert(fresh.nested[0] instanceof Uint8ClampedArray && fresh.nested[0] !== clamped);
  data[0] = 99; // the copy was made in startCopy
  assertSame(fresh.data[0], 1);
  assertSame(fresh.name, "x");
  // A root leaf, and a bad Tensor (a shape that does not fit its data) refused with its path.
  const root = startCopy(data, "cpu", { copyHostLeaves: true }).get();
  assert(root !== data && root[0] === 99);
  const bad = new Tensor(new Float32Array(4), [4]);
  (bad as { shape: readonly number[] }).shape = [5];
  refused(() => startCopy({ b: bad }, "cpu", { copyHostLeaves: true }), ".b", "has 4 elements but its shape [5] needs 5");
});

cudaTest("copyHostLeaves: device leaves copied to cpu are fresh anyway; a copy to a GPU is unchanged", async () => {
  const onGpu = await startCopy({ a: new Float32Array([1]) }, "cuda:0", { copyHostLeaves: true });
  assert(onGpu.a instanceof DeviceTensor);
  const back = await startCopy({ a: onGpu.a, h: new Float32Array([2]) }, "cpu", { copyHostLeaves: true });
  assertEquals(Array.from(back.a), [1]);
  assertEquals(Array.from(back.h), [2]);
  disposeAll([onGpu, back]);
});

/** Collects garbage where the runtime lets a test ask (a no-op elsewhere). */
function Bun_or_Deno_gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
  (globalThis as { Bun?: { gc(sync: boolean): void } }).Bun?.gc(true);
}
