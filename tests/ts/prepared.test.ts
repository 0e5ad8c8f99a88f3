// Prepared copies (prepareCopy): every family the plain copy takes gives the
// same bytes through a prepared copy; each way a batch can differ from the
// sample is refused with its path before anything is copied; user code in
// the batch cannot free what a prepared copy holds; a result is disposed per
// block. Emulated driver, two devices.
import { Arena, type DeviceTensor, disposeAll, DTYPES, MtcError, pinnedTensor, prepareCopy, prepareCopyInto, PreparedCopy, PreparedCopyInto, startCopy, Tensor, type TypedArray } from "../../ts/mod.ts";
import { skipWithoutDriver, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { assertPoolsBack, checkBatch, patterned, poolMark } from "./fixtures/checks.ts";
import { randomLeaf } from "./random_tensors.ts";

const skip = skipWithoutDriver;

/** A batch of every family: every dtype as Tensors and bare arrays, complex, empty, scalar, strided, pass-through values, a Map. */
function families(seed: number): Record<string, unknown> {
  const dense: Record<string, unknown> = {};
  for (const dtype of DTYPES) {
    dense[dtype] = randomLeaf(dtype, [3, 5], seed * 100 + Object.keys(dense).length);
    dense[`${dtype} vector`] = randomLeaf(dtype, [7], seed * 100 + 50);
    dense[`${dtype} empty`] = randomLeaf(dtype, [0, 4], seed);
  }
  const storage = patterned(Float32Array, 64, seed);
  return {
    dense,
    scalar: new Tensor(new Float64Array([seed]), [], "float64"),
    strided: [
      new Tensor(storage, [4, 3], "float32", { strides: [1, 4], offset: 2 }),
      new Tensor(patterned(Int16Array, 40, seed), [2, 2, 5], "int16", { strides: [20, 5, 1], offset: 0 }),
    ],
    complex: new Tensor(patterned(Float64Array, 8, seed), [2, 2], "complex128"),
    meta: new Map<string, unknown>([["step", seed], ["name", `b${seed}`], ["mask", patterned(Uint8Array, 9, seed)]]),
    nothing: null,
  };
}

/** The batch's copy back on the host, by the plain path, for byte comparisons. */
async function onHost(value: unknown): Promise<unknown> {
  return await startCopy(value, "cpu", { usePinnedStaging: false });
}

for (const target of ["cuda:0", "cuda:1"] as const) {
  test(`every family gives the plain copy's bytes (host → ${target})`, async () => {
    const mark = poolMark();
    using prepared = prepareCopy(families(1), target);
    for (let seed = 2; seed < 6; seed++) {
      const batch = families(seed);
      const got = await prepared.start(batch);
      const plain = await startCopy(batch, target);
      checkBatch(await onHost(got), await onHost(plain), null, `seed ${seed}`);
      assertSame((got as { meta: Map<string, unknown> }).meta.get("name"), `b${seed}`, "pass-through values come from the batch");
      assertSame((got as { nothing: unknown }).nothing, null);
      prepared.disposeResult(got);
      disposeAll(plain);
    }
    assertPoolsBack(mark, "every family");
  }, { skip });
}

test("mixed devices, pinned and arena leaves, and the host target", async () => {
  const mark = poolMark();
  using arena = Arena.create(1 << 16);
  const make = async (seed: number) => {
    arena.reset();
    const a = arena.tensor("float32", [4, 4]);
    (a.data as Float32Array).set(patterned(Float32Array, 16, seed));
    const pinned = pinnedTensor("int32", [6]);
    (pinned.data as Int32Array).set(patterned(Int32Array, 6, seed));
    const onOne = await startCopy(patterned(Float64Array, 5, seed), "cuda:1");
    const onZero = await startCopy(patterned(Uint8Array, 3, seed), "cuda:0");
    return { a, pinned, onOne, onZero, host: patterned(Int8Array, 11, seed) };
  };
  const sample = await make(1);
  using prepared = prepareCopy(sample, "cuda:0");
  const batch = await make(2);
  const got = await prepared.start(batch);
  assertSame(got.onZero, batch.onZero, "a DeviceTensor on the target is placed as it is");
  const plain = await startCopy(batch, "cuda:0");
  checkBatch(await onHost(got), await onHost(plain), null, "mixed");
  prepared.disposeResult(got);
  assert(!batch.onZero.disposed, "disposeResult leaves the tensors placed as they are alone");
  disposeAll({ ...plain, onZero: null }); // its onZero is the batch's own

  const got2 = await prepared.start(batch);
  using back = prepareCopy(got2, "cpu");
  const host = await back.start(got2);
  checkBatch(host, await onHost(batch), null, "to the host");
  back.disposeResult(host);
  assertSame((host.onOne as Float64Array).length, 0, "a host result's pinned views read as empty once disposed");
  prepared.disposeResult(got2);
  disposeAll([sample, batch]);
  (sample.pinned as Tensor).dispose();
  (batch.pinned as Tensor).dispose();
  arena.dispose();
  assertPoolsBack(mark, "mixed");
}, { skip });

test("a leaf replaced by another buffer of the same size is read from the new one", async () => {
  const batch = { x: patterned(Float32Array, 8, 1), t: new Tensor(patterned(Int32Array, 6, 1), [2, 3]) };
  using prepared = prepareCopy(batch, "cuda:0");
  batch.x = patterned(Float32Array, 8, 9);
  batch.t = new Tensor(patterned(Int32Array, 6, 9), [2, 3]);
  const got = await prepared.start(batch);
  checkBatch(await onHost(got), batch, null, "replaced");
  prepared.disposeResult(got);
}, { skip });

/** Each way a batch can differ, made from a fresh batch: [what, change, the path named, words in the message]. */
const DIFFERENCES: [string, (b: Record<string, unknown>) => void, string, string][] = [
  ["a key missing", (b) => delete b.nothing, "", '"nothing" is missing'],
  ["a key added", (b) => (b.extra = 1), "", '"extra" is not in the sample'],
  ["keys in another order", (b) => { const s = b.scalar; delete b.scalar; b.scalar = s; }, "", "another order"],
  ["an array shorter", (b) => (b.strided as unknown[]).pop(), ".strided", "has 2 items, this one 1"],
  ["a dtype", (b) => ((b.dense as Record<string, unknown>).float32 = new Tensor(new Int32Array(15), [3, 5], "int32")), ".dense.float32", "dtype was float32"],
  ["a shape", (b) => ((b.dense as Record<string, unknown>).float32 = new Tensor(new Float32Array(15), [5, 3])), ".dense.float32", "[3, 5] in the sample, [5, 3] now"],
  ["an array kind", (b) => ((b.dense as Record<string, unknown>)["int32 vector"] = new Float32Array(7)), '.dense["int32 vector"]', "of int32 in the sample"],
  ["an array length", (b) => ((b.dense as Record<string, unknown>)["int32 vector"] = new Int32Array(8)), '.dense["int32 vector"]', "32 bytes, the sample's 28"],
  ["a detached buffer", (b) => structuredClone((b.dense as Record<string, { buffer: ArrayBuffer }>)["uint8 vector"]!.buffer, { transfer: [(b.dense as Record<string, { buffer: ArrayBuffer }>)["uint8 vector"]!.buffer] }), '.dense["uint8 vector"]', "0 bytes"],
  ["strides", (b) => ((b.strided as unknown[])[0] = new Tensor(new Float32Array(64), [4, 3], "float32", { strides: [1, 5], offset: 2 })), ".strided[0]", "strides were [1, 4]"],
  ["an offset", (b) => ((b.strided as unknown[])[0] = new Tensor(new Float32Array(64), [4, 3], "float32", { strides: [1, 4], offset: 3 })), ".strided[0]", "offset was 2"],
  ["a dense Tensor now strided", (b) => ((b.dense as Record<string, unknown>).float32 = new Tensor(new Float32Array(30), [3, 5], "float32", { strides: [10, 2] })), ".dense.float32", "a strided one now"],
  ["a pass-through value now a tensor", (b) => (b.nothing = new Float32Array(2)), ".nothing", "a Float32Array now"],
  ["a tensor now a number", (b) => (b.scalar = 5), ".scalar", "number 5 now"],
  ["a Map key", (b) => { const m = b.meta as Map<string, unknown>; const v = m.get("mask"); m.delete("mask"); m.set("other", v); }, ".meta", 'the key "other"'],
  ["a container kind", (b) => (b.strided = new Map()), ".strided", "an array in the sample, a Map now"],
];

for (const [what, change, path, words] of DIFFERENCES) {
  test(`a batch that differs (${what}) is refused with its path, and nothing is copied`, () => {
    using prepared = prepareCopy(families(1), "cuda:0");
    const batch = families(2);
    change(batch);
    const mark = poolMark();
    const e = assertThrows(() => prepared.start(batch), MtcError, words);
    assertSame(e.path, path, `${what}: the path`);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
    assertEquals(poolMark(), mark, `${what}: no plan, no block`);
  }, { skip });
}

test("a disposed DeviceTensor source and one on another device are refused", async () => {
  const t = await startCopy(patterned(Float32Array, 4, 1), "cuda:1");
  using prepared = prepareCopy({ t }, "cuda:0");
  const other = await startCopy(patterned(Float32Array, 4, 1), "cuda:0");
  assertThrows(() => prepared.start({ t: other }), MtcError, "on cuda:1 in the sample, on cuda:0 now");
  const gone = await startCopy(patterned(Float32Array, 4, 1), "cuda:1");
  gone.dispose();
  assertThrows(() => prepared.start({ t: gone }), MtcError, "disposed");
  disposeAll([t, other]);
}, { skip });

test("getters in the batch cannot free what the copy holds", async () => {
  const mark = poolMark();
  const source = await startCopy(patterned(Float32Array, 16, 3), "cuda:1");
  const expected = await onHost(source);
  const sample = { first: source, second: patterned(Int32Array, 4, 1) };
  using prepared = prepareCopy(sample, "cuda:0");
  // Disposes the DeviceTensor read before it: the copy holds its block.
  const batch = { first: source } as Record<string, unknown>;
  Object.defineProperty(batch, "second", { enumerable: true, get: () => (source.dispose(), patterned(Int32Array, 4, 2)) });
  const got = await prepared.start(batch as typeof sample);
  checkBatch((await onHost(got) as { first: unknown }).first, expected, null, "the disposed source was read whole");
  prepared.disposeResult(got);

  // Detaches the array read before it: refused, with that array's path.
  const early = { a: patterned(Int32Array, 4, 1), b: patterned(Int32Array, 4, 1) };
  using two = prepareCopy(early, "cuda:0");
  const victim = patterned(Int32Array, 4, 5);
  const hostile = { a: victim } as Record<string, unknown>;
  Object.defineProperty(hostile, "b", { enumerable: true, get: () => (structuredClone(victim.buffer, { transfer: [victim.buffer] }), patterned(Int32Array, 4, 6)) });
  const e = assertThrows(() => two.start(hostile as typeof early), MtcError, "holds 0 bytes");
  assertSame(e.path, ".a");
  assertPoolsBack(mark, "getters");
}, { skip });

test("a Proxy in the batch is read once per key", async () => {
  using prepared = prepareCopy({ a: patterned(Float32Array, 4, 1), n: 1 }, "cuda:0");
  const reads: string[] = [];
  const target = { a: patterned(Float32Array, 4, 2), n: 2 };
  const proxy = new Proxy(target, { get: (o, k) => (reads.push(String(k)), (o as Record<string | symbol, unknown>)[k]) });
  const got = await prepared.start(proxy);
  assertEquals(reads, ["a", "n"], "each key read once");
  checkBatch(await onHost(got), target, null, "proxy");
  prepared.disposeResult(got);
}, { skip });

test("disposeResult disposes per block; leaves then refuse address; dispose() with copies in flight", async () => {
  const mark = poolMark();
  const prepared = prepareCopy(families(1), "cuda:0");
  const handle = prepared.start(families(2));
  prepared.dispose();
  assertThrows(() => prepared.start(families(3)), MtcError, "was disposed");
  const got = await handle; // a copy in flight outlives its prepared copy
  const leaf = (got.dense as Record<string, DeviceTensor>).float32!;
  assert(leaf.address !== 0);
  prepared.disposeResult(got);
  const e = assertThrows(() => leaf.address, MtcError, "was disposed");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
  assert(leaf.disposed, "disposed reads true");
  assertThrows(() => startCopy({ leaf }, "cuda:1"), MtcError, "disposed");
  prepared.disposeResult(got); // idempotent
  assertThrows(() => prepared.disposeResult({} as typeof got), MtcError, "not a result of this prepared copy");
  assertPoolsBack(mark, "disposeResult");
}, { skip });

test("disposeAll of a prepared result gives every block back too", async () => {
  const mark = poolMark();
  using prepared = prepareCopy(families(1), "cuda:0");
  disposeAll(await prepared.start(families(2)));
  assertPoolsBack(mark, "disposeAll");
}, { skip });

test("prepareCopy checks the sample as startCopy does, and refuses strict and copyHostLeaves", () => {
  assertThrows(() => prepareCopy({ t: new Tensor(new Float32Array(4), [2, 2]) }, "cuda:0", { strict: true }), MtcError, "strict");
  const bad = { t: new Tensor(new Float32Array(4), [2, 2]) };
  (bad.t as { shape: unknown }).shape = [3, 3];
  const e = assertThrows(() => prepareCopy(bad, "cuda:0"), MtcError);
  assertSame(e.path, ".t");
  const samples: TypedArray[] = [];
  assertSame(prepareCopy(samples, "cuda:0").leafCount, 0);
}, { skip });

test("an arena batch's copy keeps the arena busy until it is over", async () => {
  using arena = Arena.create(1 << 16);
  const fill = (seed: number) => {
    const a = arena.tensor("int32", [16]);
    (a.data as Int32Array).set(patterned(Int32Array, 16, seed));
    return { a };
  };
  using prepared = prepareCopy(fill(1), "cuda:0");
  await arena.reset();
  const batch = fill(2);
  const expected = patterned(Int32Array, 16, 2);
  await withCopyDelay(150_000, async () => {
    const handle = prepared.start(batch);
    assert(arena.busy, "busy while the copy reads the arena");
    assertSame(arena.tryReset(), false, "tryReset refuses while busy");
    const got = await handle;
    checkBatch(await onHost(got), { a: expected }, null, "the arena's bytes at start");
    prepared.disposeResult(got);
  });
  assert(arena.tryReset(), "idle once the copy is over");
}, { skip });

test("leaves of two arenas and pinned tensors, interleaved: each read from its own buffer", async () => {
  using first = Arena.create(1 << 16);
  using second = Arena.create(1 << 16);
  const make = (seed: number) => {
    first.tryReset();
    second.tryReset();
    const leaves: (Tensor | TypedArray)[] = [];
    // Runs of one, two and three leaves of a buffer: a run's later leaves are read from its first's buffer address.
    for (let i = 0; i < 4; i++) {
      for (let k = 0; k < 3; k++) {
        const a = first.array("float32", 5 + i + k);
        a.set(patterned(Float32Array, 5 + i + k, seed + i * 3 + k));
        leaves.push(a);
      }
      for (let k = 0; k < 2; k++) {
        const b = second.tensor("int32", [3, 1 + i + k]);
        (b.data as Int32Array).set(patterned(Int32Array, 3 * (1 + i + k), seed + 10 + i * 2 + k));
        leaves.push(b);
      }
      const p = pinnedTensor("int16", [2 + i]);
      (p.data as Int16Array).set(patterned(Int16Array, 2 + i, seed + 20 + i));
      leaves.push(p);
    }
    return leaves;
  };
  const sample = make(1);
  using prepared = prepareCopy(sample, "cuda:0");
  for (const seed of [2, 3]) {
    const batch = make(seed * 100);
    const got = await prepared.start(batch);
    checkBatch(await onHost(got), await onHost(batch), null, `batch ${seed}`);
    prepared.disposeResult(got);
    for (const leaf of batch) if (leaf instanceof Tensor && leaf.dtype === "int16") leaf.dispose();
  }
  for (const leaf of sample) if (leaf instanceof Tensor && leaf.dtype === "int16") leaf.dispose();
}, { skip });

test("an own \"__proto__\" key stays a key of the result, beside leaves and pass-through values", async () => {
  const make = (seed: number) => {
    const o = JSON.parse('{"a": 0, "__proto__": 0, "b": 0}') as Record<string, unknown>;
    o.a = patterned(Float32Array, 3, seed);
    Object.defineProperty(o, "__proto__", { value: patterned(Int32Array, 2, seed), enumerable: true, writable: true, configurable: true });
    o.b = `pass ${seed}`;
    return o;
  };
  using prepared = prepareCopy(make(1), "cuda:0");
  const batch = make(2);
  const got = await prepared.start(batch);
  assertEquals(Object.keys(got), ["a", "__proto__", "b"]);
  assertSame(Object.getPrototypeOf(got), Object.prototype, "the key did not become the prototype");
  assertSame(got.b, "pass 2");
  checkBatch(await onHost(got), await onHost(batch), null, "__proto__");
  prepared.disposeResult(got);
}, { skip });

test("a leaf in a resizable buffer is read from a snapshot: shrinking it after start changes nothing", async () => {
  const make = (seed: number) => {
    const buffer = new ArrayBuffer(4096, { maxByteLength: 4096 });
    const view = new Float32Array(buffer);
    view.set(patterned(Float32Array, 1024, seed));
    return { view };
  };
  using prepared = prepareCopy(make(1), "cuda:0");
  const batch = make(2);
  const expected = patterned(Float32Array, 1024, 2);
  await withCopyDelay(50_000, async () => {
    const handle = prepared.start(batch);
    (batch.view.buffer as ArrayBuffer & { resize(n: number): void }).resize(0);
    const got = await handle;
    checkBatch(await onHost(got), { view: expected }, null, "the bytes at start");
    prepared.disposeResult(got);
  });
}, { skip });

test("prepareCopyInto: destinations disposed while a copy is in flight stay allocated until it is over", async () => {
  const buffers = await startCopy({ x: patterned(Float32Array, 256, 0) }, "cuda:0");
  using prepared = prepareCopyInto({ x: patterned(Float32Array, 256, 1) }, buffers);
  await withCopyDelay(150_000, async () => {
    const blocks = poolMark().blocksLive;
    const handle = prepared.start({ x: patterned(Float32Array, 256, 2) });
    buffers.x.dispose();
    assertSame(poolMark().blocksLive, blocks, "the copy holds the destination's block");
    await handle;
    handle.dispose();
  });
}, { skip });

test("the same arrays batch after batch: their new bytes are copied, a detached one is refused, a replaced one read anew", async () => {
  const batch = { a: patterned(Float32Array, 64, 1), b: [patterned(Int32Array, 8, 1)] };
  using prepared = prepareCopy(batch, "cuda:0");
  for (let seed = 2; seed < 5; seed++) {
    batch.a.set(patterned(Float32Array, 64, seed));
    const got = await prepared.start(batch);
    checkBatch(await onHost(got), batch, null, `the same arrays, bytes of step ${seed}`);
    prepared.disposeResult(got);
  }
  structuredClone(batch.b[0]!.buffer, { transfer: [batch.b[0]!.buffer] });
  assertSame(assertThrows(() => prepared.start(batch), MtcError, "0 bytes").path, ".b[0]");
  batch.b[0] = patterned(Int32Array, 8, 7);
  const got = await prepared.start(batch);
  checkBatch(await onHost(got), batch, null, "the replaced array");
  prepared.disposeResult(got);
}, { skip });

test("new PreparedCopy() and new PreparedCopyInto() are refused: only prepareCopy and prepareCopyInto make them", () => {
  const Copy = PreparedCopy as unknown as new (...args: unknown[]) => unknown;
  const Into = PreparedCopyInto as unknown as new (...args: unknown[]) => unknown;
  const forged = { root: { what: 1, path: "", kind: 0, keys: [], length: 0, children: [] }, leaves: [], parents: [], keys: [] };
  assertThrows(() => new Copy(Symbol("made by prepareCopy"), forged, 0, {}, new Uint32Array(10), new Uint8Array(0), 0x1234, null), MtcError, "made by prepareCopy");
  assertThrows(() => new Into(Symbol("made by prepareCopyInto"), forged), MtcError, "made by prepareCopyInto");
});

test("a getter that resets or disposes the arena a batch lies in, after its leaves were read: refused, nothing copied", () => {
  for (const how of ["reset", "dispose"] as const) {
    const mark = poolMark();
    const arena = Arena.create(1 << 16);
    const make = (seed: number) => {
      const leaves = [0, 1, 2].map((i) => {
        const a = arena.array("float32", 8);
        a.set(patterned(Float32Array, 8, seed + i));
        return a;
      });
      return { a: leaves[0]!, b: leaves[1]!, c: leaves[2]! } as Record<string, unknown>;
    };
    const prepared = prepareCopy(make(1), "cuda:0");
    arena.tryReset();
    const batch = make(2);
    const last = batch.c;
    // Read after a and b: frees the memory they lie in (their views read empty from now on).
    Object.defineProperty(batch, "c", { enumerable: true, get: () => (how === "reset" ? arena.tryReset() : arena.dispose(), last) });
    const e = assertThrows(() => prepared.start(batch as ReturnType<typeof make>), MtcError);
    assert(e.path === ".a" || e.path === ".b" || e.path === ".c", `${how}: the error names a leaf of the arena: ${e.path} ${e.message}`);
    prepared.dispose();
    arena.dispose();
    assertPoolsBack(mark, how);
  }
}, { skip });

test("pageable leaves of a prepared batch are staged; only pinned memory of the library's is read in place", async () => {
  using arena = Arena.create(1 << 16);
  const make = (seed: number) => {
    arena.tryReset();
    const inArena = arena.array("float32", 16);
    inArena.set(patterned(Float32Array, 16, seed));
    return { pageable: [patterned(Float32Array, 16, seed + 1), patterned(Int32Array, 8, seed + 2), patterned(Int32Array, 8, seed + 3)], inArena };
  };
  using prepared = prepareCopy(make(1), "cuda:0");
  for (const seed of [2, 3]) {
    const handle = prepared.start(make(seed * 10));
    const got = await handle;
    const stats = handle.stats();
    assertSame(stats.leavesDirect, 1, `batch ${seed}: the arena's leaf read in place`);
    assertSame(stats.bytesStaged, 16 * 4 + 2 * 8 * 4, `batch ${seed}: every pageable byte staged`);
    prepared.disposeResult(got);
  }
}, { skip });
