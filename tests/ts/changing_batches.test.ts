// A batch whose structure changes between calls: each change must show in
// the very next copy, after many copies of the structure before it (so the
// engines have compiled the walk for that structure). The host path (a copy
// to "cpu", which mirrors the containers and reuses the leaves) runs
// without a driver; copies to cuda:0 and back run on the emulated driver.
import { DeviceTensor, disposeAll, startCopy, Tensor, type TypedArray } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, AssertionError, runner, test } from "./harness.ts";
import { assertPoolsBack, checkBytes, patterned, poolMark, Tally } from "./fixtures/checks.ts";

const tally = new Tally("changing_batches");
const WARM = 60; // copies of the structure before the change

type Batch = Record<string, unknown>;

/** The batch every case starts from: objects, arrays, a Map, host leaves of three kinds, and pass-through values. */
function base(): Batch {
  return {
    samples: [0, 1, 2].map((s) => ({
      boxes: new Tensor(patterned(Float32Array, 8, s), [2, 4]),
      ids: patterned(BigInt64Array, 3, s + 10),
      name: `s${s}`,
    })),
    extra: new Map<string, unknown>([["mask", new Tensor(patterned(Uint8Array, 5, 7), [5], "bool")], ["step", 3]]),
    lengths: patterned(Int32Array, 4, 9),
  };
}

/** The shape a host leaf stands for. */
function shapeOf(leaf: TypedArray | Tensor): readonly number[] {
  return leaf instanceof Tensor ? leaf.shape : [leaf.length];
}

function dtypeOf(leaf: TypedArray | Tensor): string {
  if (leaf instanceof Tensor) return leaf.dtype;
  const names: Record<string, string> = { Float32Array: "float32", BigInt64Array: "int64", Int32Array: "int32", Uint8Array: "uint8", Float64Array: "float64", Int16Array: "int16" };
  return names[leaf.constructor.name]!;
}

/**
 * Fails unless `output` mirrors `input` for a copy to `device`: the same
 * containers and keys in the same order, pass-through values and leaves
 * already there by identity, every other leaf a copy with its shape, dtype
 * and bytes.
 */
function expectMirror(input: unknown, output: unknown, device: "cpu" | "cuda:0", path = ""): void {
  if (input instanceof DeviceTensor) {
    if (input.device === device) return assertSame(output, input, `${path}: reused`);
    if (device === "cpu") {
      assert(output instanceof Tensor || ArrayBuffer.isView(output), `${path}: a host leaf`);
      const leaf = output as TypedArray | Tensor;
      assertEquals([...shapeOf(leaf)], [...input.shape], `${path}: shape`);
      assertSame(dtypeOf(leaf), input.dtype, `${path}: dtype`);
      checkBytes(leaf, input.toHost() as TypedArray | Tensor, tally, path);
      return;
    }
    assert(output instanceof DeviceTensor && output !== input, `${path}: a new DeviceTensor`);
    assertSame(output.device, device, `${path}: device`);
    assertEquals([...output.shape], [...input.shape], `${path}: shape`);
    assertSame(output.dtype, input.dtype, `${path}: dtype`);
    checkBytes(output.toHost() as TypedArray | Tensor, input.toHost() as TypedArray | Tensor, tally, path);
    return;
  }
  if (input instanceof Tensor || (ArrayBuffer.isView(input) && !(input instanceof DataView))) {
    const leaf = input as TypedArray | Tensor;
    if (device === "cpu") return assertSame(output, input, `${path}: reused`);
    assert(output instanceof DeviceTensor, `${path}: a DeviceTensor`);
    assertSame(output.device, device, `${path}: device`);
    assertEquals([...output.shape], [...shapeOf(leaf)], `${path}: shape`);
    assertSame(output.dtype, dtypeOf(leaf), `${path}: dtype`);
    checkBytes(output.toHost() as TypedArray | Tensor, leaf, tally, path);
    return;
  }
  if (Array.isArray(input)) {
    assert(Array.isArray(output) && output !== input, `${path}: a new array`);
    assertSame(output.length, input.length, `${path}: length`);
    input.forEach((v, i) => expectMirror(v, output[i], device, `${path}[${i}]`));
    return;
  }
  if (input instanceof Map) {
    assert(output instanceof Map && output !== input, `${path}: a new Map`);
    assertEquals([...output.keys()], [...input.keys()], `${path}: keys`);
    for (const [k, v] of input) expectMirror(v, output.get(k), device, `${path}[${String(k)}]`);
    return;
  }
  if (typeof input === "object" && input !== null && Object.getPrototypeOf(input) === Object.prototype) {
    assert(typeof output === "object" && output !== null && output !== input, `${path}: a new object`);
    assertEquals(Object.keys(output), Object.keys(input), `${path}: keys`);
    for (const k of Object.keys(input)) expectMirror((input as Batch)[k], (output as Batch)[k], device, `${path}.${k}`);
    return;
  }
  if (output !== input) throw new AssertionError(`${path}: ${String(output)} passed through, expected ${String(input)}`);
}

/** Copies `batch` WARM times, then changes it and copies once: that copy must mirror the changed batch. */
function changeCase(name: string, change: (batch: Batch) => void): void {
  test(`changing batches (host path): ${name}`, () => {
    const batch = base();
    for (let i = 0; i < WARM; i++) expectMirror(batch, startCopy(batch, "cpu").get(), "cpu");
    change(batch);
    expectMirror(batch, startCopy(batch, "cpu").get(), "cpu");
    tally.cases++;
    tally.copies += WARM + 1;
  });
  test(`changing batches (emulated driver): ${name}`, () => {
    const mark = poolMark();
    const batch = base();
    for (let i = 0; i < WARM; i++) disposeAll(startCopy(batch, "cuda:0").get());
    const before = startCopy(batch, "cuda:0").get();
    expectMirror(batch, before, "cuda:0");
    change(batch);
    const after = startCopy(batch, "cuda:0").get();
    expectMirror(batch, after, "cuda:0");
    const back = startCopy(after, "cpu").get(); // and the results of the changed batch back to the host
    expectMirror(after, back, "cpu");
    disposeAll([before, after, back]);
    disposeAll(batch); // the DeviceTensors some cases put into it
    assertPoolsBack(mark, name);
    tally.cases++;
    tally.copies += WARM + 3;
  }, { skip: skipWithoutDriver });
}

const samples = (b: Batch) => b.samples as Batch[];

changeCase("a key added to an object", (b) => {
  samples(b)[1]!.depths = patterned(Float64Array, 6, 21);
});
changeCase("a key added in the middle of the key order", (b) => {
  const s = samples(b)[0]!;
  const { boxes, ids, name } = s;
  for (const k of Object.keys(s)) delete s[k];
  Object.assign(s, { boxes, extra: patterned(Int16Array, 2, 22), ids, name });
});
changeCase("a key removed", (b) => {
  delete samples(b)[2]!.ids;
});
changeCase("an array grown", (b) => {
  samples(b).push({ boxes: new Tensor(patterned(Float32Array, 12, 23), [3, 4]), ids: patterned(BigInt64Array, 1, 24), name: "s3" });
});
changeCase("an array shrunk, to nothing", (b) => {
  b.samples = [];
});
changeCase("an array shrunk by one", (b) => {
  samples(b).pop();
});
changeCase("a leaf replaced by one of another dtype", (b) => {
  samples(b)[0]!.ids = patterned(Int32Array, 3, 25);
  samples(b)[1]!.boxes = new Tensor(patterned(Uint8Array, 8, 26), [8], "bool");
});
changeCase("a leaf replaced by one of another shape and size", (b) => {
  samples(b)[2]!.boxes = new Tensor(patterned(Float32Array, 0, 27), [0, 4]);
  b.lengths = patterned(Int32Array, 1000, 28);
});
changeCase("a leaf replaced by a value that is no tensor, and one the other way round", (b) => {
  samples(b)[0]!.ids = 42;
  samples(b)[1]!.name = patterned(Uint8Array, 3, 29);
});
changeCase("a container replaced by a leaf, and a leaf by a container", (b) => {
  b.extra = patterned(Float32Array, 2, 30);
  b.lengths = [patterned(Int32Array, 2, 31), { nested: patterned(Int32Array, 1, 32) }];
});
changeCase("a Map key added and one removed", (b) => {
  const m = b.extra as Map<string, unknown>;
  m.delete("step");
  m.set("weights", patterned(Float32Array, 3, 33));
});

test("changing batches (emulated driver): a leaf replaced by one on another device, and back", () => {
  const mark = poolMark();
  const batch = base();
  for (let i = 0; i < WARM; i++) disposeAll(startCopy(batch, "cuda:0").get());
  const hostIds = samples(batch)[0]!.ids;
  const onOne = startCopy(hostIds, "cuda:1").get() as DeviceTensor;
  const onZero = startCopy(samples(batch)[1]!.boxes, "cuda:0").get() as DeviceTensor;
  samples(batch)[0]!.ids = onOne; // cuda:1 → cuda:0: copied
  samples(batch)[1]!.boxes = onZero; // on the target: reused
  const out = startCopy(batch, "cuda:0").get();
  expectMirror(batch, out, "cuda:0");
  assertSame(samples(out as Batch)[1]!.boxes, onZero);
  const back = startCopy(out, "cpu").get();
  expectMirror(out, back, "cpu");
  samples(batch)[0]!.ids = hostIds; // and a host leaf again
  const again = startCopy(batch, "cuda:0").get();
  expectMirror(batch, again, "cuda:0");
  disposeAll([out, back, again, onOne, onZero]);
  assertPoolsBack(mark, "another device");
  tally.cases++;
  tally.copies += WARM + 5;
}, { skip: skipWithoutDriver });

test("changing batches: counts: every case ran, every copy checked", () => {
  tally.check(runner, { cases: 23, copies: 1429, bytes: 14_272 });
}, { skip: skipWithoutDriver });
