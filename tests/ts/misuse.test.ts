// A careless or hostile caller, in this process, through the emulated driver:
// inputs changed once ready() is true, copies started from inside another
// copy (a getter on a leaf, a patched Map.prototype.set while results are
// built), shapes mutated after a copy. Each result must describe exactly
// what was copied, and every pool counter must come back.
// (Mutations that could crash a process run as children: exit.test.ts.)
import { type CopyOptions, DeviceTensor, disposeAll, MtcError, startCopy, Status, Tensor, type TypedArray } from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { encodeOptions, OPTIONS_SIZE, resolveOptions } from "../../ts/copy/options.ts";
import { skipWithoutDriver, tick } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, runner, test } from "./harness.ts";
import { assertPoolsBack, checkBytes, patterned, poolMark, Tally } from "./fixtures/checks.ts";

const tally = new Tally("misuse");
const skip = skipWithoutDriver;

function misuse(name: string, fn: () => void | Promise<void>): void {
  test(`misuse: ${name}`, async () => {
    const mark = poolMark();
    await fn();
    assertPoolsBack(mark, name);
    tally.cases++;
  }, { skip, timeout: 60_000 });
}

async function whenReady(h: { ready(): boolean }): Promise<void> {
  while (!h.ready()) await tick(0);
}

/** A DeviceTensor's claims and its bytes, read back. */
function checkResult(out: unknown, shape: number[], dtype: string, expected: ArrayBufferView | Tensor, what: string): void {
  assert(out instanceof DeviceTensor, `${what}: a DeviceTensor`);
  assertSame(out.device, "cuda:0", `${what}: device`);
  assertEquals([...out.shape], shape, `${what}: shape`);
  assertSame(out.dtype, dtype, `${what}: dtype`);
  const bytes = expected instanceof Tensor ? expected.data.byteLength : expected.byteLength;
  assertSame(out.byteLength, bytes, `${what}: byteLength`);
  checkBytes(out.toHost(), expected, tally, what);
  tally.copies++;
}

const PACKINGS: [string, CopyOptions][] = [["packed", {}], ["unpacked", { packCpuTensors: false }]];

// ---------------------------------------------- results fixed at startCopy

misuse("an input transferred after ready(): the result still says 16 bytes, shape [4]", async () => {
  for (const [how, options] of PACKINGS) {
    const source = new Float32Array([1, 2, 3, 4]);
    const neighbour = patterned(Uint8Array, 64, 1);
    const expected = source.slice();
    const h = startCopy({ source, neighbour }, "cuda:0", options);
    await whenReady(h);
    source.buffer.transfer(); // allowed once ready() is true
    const out = h.get();
    h.dispose();
    checkResult(out.source, [4], "float32", expected, `${how}: transferred input`);
    checkResult(out.neighbour, [64], "uint8", neighbour, `${how}: its neighbour`);
    disposeAll(out);
    tally.copies++;
  }
});

misuse("a length-tracking view whose resizable buffer grew after ready(): 16 bytes copied, 16 claimed", async () => {
  for (const [how, options] of PACKINGS) {
    const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
    const tracking = new Float32Array(buffer);
    tracking.set([1, 2, 3, 4]);
    const neighbour = new Float32Array([9, 8, 7, 6]);
    const h = startCopy({ tracking, neighbour }, "cuda:0", options);
    await whenReady(h);
    buffer.resize(32);
    assertSame(tracking.length, 8);
    const out = h.get();
    h.dispose();
    checkResult(out.tracking, [4], "float32", new Float32Array([1, 2, 3, 4]), `${how}: grown view`);
    checkResult(out.neighbour, [4], "float32", neighbour, `${how}: its neighbour`);
    disposeAll(out);
    tally.copies++;
  }
});

misuse("a host Tensor whose data was transferred after ready(): 24 bytes, shape [2, 3]", async () => {
  for (const [how, options] of PACKINGS) {
    const data = new Int32Array([1, 2, 3, 4, 5, 6]);
    const tensor = new Tensor(data, [2, 3]);
    const expected = data.slice();
    const h = startCopy({ tensor }, "cuda:0", options);
    await whenReady(h);
    data.buffer.transfer();
    const out = h.get();
    h.dispose();
    checkResult(out.tensor, [2, 3], "int32", expected, `${how}: Tensor with transferred data`);
    disposeAll(out);
    tally.copies++;
  }
});

misuse("a copy to the host: outputs keep the shape and dtype the DeviceTensor had at startCopy", async () => {
  const source = new Tensor(patterned(Uint16Array, 12, 4), [3, 4], "bfloat16");
  const onGpu = startCopy({ source }, "cuda:0").get();
  const h = startCopy(onGpu, "cpu");
  await whenReady(h);
  // The fields are getters (assigning throws), but own properties can still shadow them.
  for (const [field, value] of Object.entries({ shape: [12], dtype: "uint8", byteLength: 1 })) {
    Object.defineProperty(onGpu.source, field, { value });
  }
  const back = h.get();
  h.dispose();
  assert(back.source instanceof Tensor, "a Tensor");
  assertEquals([...back.source.shape], [3, 4]);
  assertSame(back.source.dtype, "bfloat16");
  checkBytes(back.source, source, tally, "host output");
  disposeAll([back, onGpu]);
  tally.copies += 2;
});

// ------------------------------------------------------------ re-entrancy

/** A Tensor whose `data` is a getter that runs `nested` (another copy) each time it is read. */
function lazyTensor(data: TypedArray, shape: number[], nested: () => void): { tensor: Tensor; reads: () => number } {
  const tensor = new Tensor(data, shape);
  let reads = 0;
  Object.defineProperty(tensor, "data", {
    get() {
      reads++;
      nested();
      return data;
    },
  });
  return { tensor, reads: () => reads };
}

/** A batch of `n` patterned leaves around `middle`, so that a clobbered descriptor or result shows. */
function around(middle: unknown, n: number, seed: number): { batch: Record<string, unknown>; leaves: TypedArray[] } {
  const before = Array.from({ length: n }, (_, i) => patterned(Float32Array, 3 + i, seed + i));
  const after = Array.from({ length: n }, (_, i) => patterned(Int16Array, 5 + i, seed + 50 + i));
  return { batch: { before, middle, after }, leaves: [...before, ...after] };
}

function checkAround(out: Record<string, unknown>, leaves: TypedArray[], what: string): void {
  const got = [...(out.before as unknown[]), ...(out.after as unknown[])];
  assertSame(got.length, leaves.length, `${what}: leaves`);
  got.forEach((leaf, i) => {
    const expected = leaves[i]!;
    checkResult(leaf, [expected.length], expected instanceof Float32Array ? "float32" : "int16", expected, `${what}: leaf ${i}`);
  });
}

misuse("a leaf whose getter runs other copies (toHost, another startCopy): the outer copy is exact; read once", async () => {
  const onOne = startCopy(patterned(Float64Array, 40, 7), "cuda:1").get();
  const innerSource = Array.from({ length: 30 }, (_, i) => patterned(Uint8Array, 10 + i, 90 + i));
  const inner: unknown[] = [];
  const lazyData = patterned(Float32Array, 6, 11);
  const lazy = lazyTensor(lazyData, [2, 3], () => {
    inner.push(onOne.toHost()); // a copy to the host, collected at once
    inner.push(startCopy(innerSource, "cuda:1").get()); // a copy to another device, started and collected
  });
  for (const [how, options] of [...PACKINGS, ["foreground", { useBackgroundThread: false }] as [string, CopyOptions]]) {
    const { batch, leaves } = around(lazy.tensor, 24, 20);
    const before = lazy.reads();
    const h = startCopy(batch, "cuda:0", options);
    assertSame(lazy.reads(), before + 1, `${how}: the getter ran once, in startCopy`);
    const out = await h;
    h.dispose();
    assertSame(lazy.reads(), before + 1, `${how}: and never again while the results were built`);
    checkAround(out, leaves, how);
    checkResult(out.middle, [2, 3], "float32", lazyData, `${how}: the lazy leaf`);
    disposeAll(out);
  }
  for (let i = 1; i < inner.length; i += 2) {
    const copies = inner[i] as DeviceTensor[];
    copies.forEach((c, k) => checkBytes(c.toHost(), innerSource[k]!, tally, `nested copy, leaf ${k}`));
  }
  disposeAll([inner, onOne]);
  tally.copies += inner.length;
});

misuse("copies started while results are built (a patched Map.prototype.set): both are exact", () => {
  const onOne = startCopy(Array.from({ length: 40 }, (_, i) => patterned(Uint8Array, 20 + i, i)), "cuda:1").get();
  const innerBytes = onOne.map((t) => t.toHost());
  const { batch, leaves } = around(null, 30, 40);
  const input = new Map<string, unknown>([["first", patterned(Float32Array, 8, 3)], ["all", batch], ["last", patterned(Float32Array, 9, 4)]]);
  const set = Map.prototype.set;
  const nested: unknown[] = [];
  Map.prototype.set = function (this: Map<unknown, unknown>, key: unknown, value: unknown) {
    if (value instanceof DeviceTensor && key === "first" && nested.length === 0) {
      nested.push(startCopy(onOne, "cpu").get()); // reads results into the same kind of buffer
      nested.push(startCopy(onOne, "cuda:0").get());
    }
    return set.call(this, key, value);
  } as typeof set;
  let out: Map<string, unknown>;
  try {
    out = startCopy(input, "cuda:0").get() as Map<string, unknown>;
  } finally {
    Map.prototype.set = set;
  }
  assertSame(nested.length, 2, "the nested copies ran while the outer results were built");
  checkResult(out.get("first"), [8], "float32", input.get("first") as TypedArray, "first");
  checkResult(out.get("last"), [9], "float32", input.get("last") as TypedArray, "last");
  checkAround(out.get("all") as Record<string, unknown>, leaves, "outer");
  (nested[0] as TypedArray[]).forEach((leaf, i) => checkBytes(leaf, innerBytes[i]!, tally, `nested to host ${i}`));
  (nested[1] as DeviceTensor[]).forEach((leaf, i) => checkResult(leaf, [20 + i], "uint8", innerBytes[i]!, `nested to cuda:0 ${i}`));
  disposeAll([out, nested, onOne]);
  tally.copies += 4;
});

// ------------------------------------------------------------------ shapes

misuse("shapes are frozen where they are made: Tensor, DeviceTensor, host outputs", () => {
  const shape = [2, 3];
  const source = new Tensor(patterned(Float32Array, 6, 5), shape);
  shape[0] = 3; // the caller's own array: the Tensor made its own copy
  assertEquals([...source.shape], [2, 3]);
  assert(Object.isFrozen(source.shape), "a Tensor's shape is frozen");
  assertThrows(() => (source.shape as number[])[0] = 6, TypeError);
  const onGpu = startCopy({ source, bare: patterned(Int8Array, 5, 1) }, "cuda:0").get();
  for (const t of [onGpu.source, onGpu.bare]) {
    assert(Object.isFrozen(t.shape), "a DeviceTensor's shape is frozen");
    assertThrows(() => (t.shape as number[]).push(1), TypeError);
  }
  assertEquals([...onGpu.source.shape], [2, 3]);
  assertEquals([...onGpu.bare.shape], [5]);
  const back = startCopy(onGpu, "cpu").get();
  assert(back.source instanceof Tensor && Object.isFrozen(back.source.shape), "a host output's shape is frozen");
  assertThrows(() => (back.source as Tensor).shape.length === 0 || ((back.source as Tensor).shape as number[]).pop(), TypeError);
  assertEquals([...onGpu.source.shape], [2, 3]);
  assertEquals([...source.shape], [2, 3]);
  disposeAll([onGpu, back]);
  tally.copies += 2;
});

misuse("a Tensor whose shape was reassigned or forged: copied by the shape read at startCopy, or refused", () => {
  const source = new Tensor(patterned(Float32Array, 6, 5), [2, 3]);
  const reshaped: number[] = [3, 2];
  Object.assign(source, { shape: reshaped }); // readonly only by type
  const onGpu = startCopy({ source }, "cuda:0").get();
  reshaped[0] = 6; // the caller's array changes afterwards: the result does not
  checkResult(onGpu.source, [3, 2], "float32", source.data, "reassigned shape");
  assert(Object.isFrozen(onGpu.source.shape), "frozen");
  Object.assign(source, { shape: [7] });
  const e = assertThrows(() => startCopy({ cam: { source } }, "cuda:0"), MtcError, "shape [7] needs 7");
  assertSame(e.path, ".cam.source");
  disposeAll(onGpu);
  tally.copies++;
});

// ------------------------------------------------------------------ C ABI

misuse("C ABI: a failed plan rejects a second submit and keeps the error that ended it", () => {
  const sym = library().symbols;
  const options = new Uint8Array(OPTIONS_SIZE);
  encodeOptions(resolveOptions(undefined), new DataView(options.buffer));
  const out = new BigUint64Array(1);
  const data = new Float32Array(16);
  const leaf = new DataView(new ArrayBuffer(40)); // mtc_leaf
  leaf.setBigUint64(0, BigInt(library().backend.pointerOf(data)), true);
  leaf.setBigUint64(8, 64n, true);
  leaf.setInt32(24, 7, true); // cuda:7: not on this machine
  leaf.setUint32(28, 4, true);
  for (const background of [0, 1]) {
    new DataView(options.buffer).setUint32(12, background, true); // use_background_thread
    assertSame(sym.mtc_plan_create(0, options, new Uint8Array(out.buffer)), Status.MTC_OK);
    const plan = Number(out[0]);
    try {
      assertSame(sym.mtc_plan_add_leaves(plan, new Uint8Array(leaf.buffer), 1), Status.MTC_OK);
      assertSame(sym.mtc_plan_submit(plan), Status.MTC_ERR_NO_DEVICE);
      const first = sym.mtc_plan_last_error(plan);
      assert(first.includes("cuda:7"), first);
      assertSame(sym.mtc_plan_submit(plan), Status.MTC_ERR_INVALID_STATE);
      assert(sym.mtc_last_error().includes("already submitted"), sym.mtc_last_error());
      assertSame(sym.mtc_plan_poll(plan), Status.MTC_ERR_NO_DEVICE);
      assertSame(sym.mtc_plan_last_error(plan), first);
      assertSame(sym.mtc_last_error(), first);
      assertSame(sym.mtc_plan_error_leaf(plan), 0);
    } finally {
      sym.mtc_plan_release(plan);
    }
  }
});

test("misuse: totals: every case ran, every copy checked", () => tally.check(runner, { cases: 9, copies: 281, bytes: 15_647 }), { skip });
