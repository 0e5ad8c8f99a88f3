// Pinned host tensors and arenas: copies read them in place (no staging),
// arenas are reused only once no copy reads them, and a reset empties the
// views it handed out. Emulated driver.
import {
  Arena,
  copyInto,
  DeviceTensor,
  disposeAll,
  MtcError,
  pinnedArray,
  pinnedTensor,
  poolStats,
  setPinnedHeldLimit,
  startArenaCopy,
  startCopy,
  Status,
  Tensor,
  type TypedArray,
} from "../../ts/mod.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { skipWithoutDriver, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, test } from "./harness.ts";
import { runScript } from "./fixtures/spawn.ts";
import { bytesOf, DTYPES, randomLeaf } from "./random_tensors.ts";

const pinnedTest = (name: string, fn: () => void | Promise<void>) => test(`pinned: ${name}`, fn, { skip: skipWithoutDriver });

/** Every leaf of `onGpu` (DeviceTensors, nested as `batch`) holds the bytes of `batch`'s leaf. */
function sameLeaves(batch: Record<string, TypedArray | Tensor>, onGpu: Record<string, DeviceTensor>): void {
  for (const key of Object.keys(batch)) {
    const back = onGpu[key]!.toTensor();
    assertEquals(bytesOf(back.data), bytesOf(batch[key]!), key);
  }
}

pinnedTest("a pinned tensor is read in place: no bytes staged, exact", async () => {
  const before = poolStats();
  {
    using boxes = pinnedTensor("float32", [100, 4]);
    const ids = pinnedArray("int32", 77);
    (boxes.data as Float32Array).set(Float32Array.from({ length: 400 }, (_, i) => i * 0.5));
    ids.set(Int32Array.from({ length: 77 }, (_, i) => -i));
    assert(poolStats().pinnedHeldBytes > before.pinnedHeldBytes, "held bytes counted");
    const handle = startCopy({ boxes, ids }, "cuda:0");
    const onGpu = await handle;
    const stats = handle.stats();
    assertSame(stats.leavesDirect, 2);
    assertSame(stats.bytesStaged, 0);
    sameLeaves({ boxes, ids }, onGpu);
    disposeAll(onGpu);
    assertSame(disposeAll(ids), 1, "a pinned array is released by disposeAll");
    assertSame(ids.length, 0, "released: empty");
  }
  assertSame(poolStats().pinnedHeldBytes, before.pinnedHeldBytes, "using gave it back");
});

pinnedTest("empty pinned tensors and arrays: no memory held, copied as empty", async () => {
  const before = poolStats().pinnedHeldBytes;
  using t = pinnedTensor("float32", [0, 4]);
  const a = pinnedArray("int8", 0);
  assertSame(poolStats().pinnedHeldBytes, before);
  const onGpu = await startCopy({ t, a }, "cuda:0");
  assertEquals(onGpu.t.shape, [0, 4]);
  assertSame(onGpu.a.byteLength, 0);
  disposeAll(onGpu);
});

pinnedTest("mixed pinned and pageable leaves of every dtype at odd sizes: exact, only pageable staged", async () => {
  using arena = Arena.create(1 << 20);
  const batch: Record<string, TypedArray | Tensor> = {};
  let pageable = 0;
  DTYPES.forEach((dtype, k) => {
    const shape = [1 + (k * 7) % 13, 3];
    const source = randomLeaf(dtype, shape, k + 1);
    if (k % 3 === 0) {
      batch[`p${k}`] = source;
      pageable += bytesOf(source).byteLength;
    } else {
      const t = arena.tensor(dtype, shape);
      bytesOf(t.data).set(bytesOf(source));
      batch[`a${k}`] = t;
    }
  });
  const handle = startCopy(batch, "cuda:0");
  const onGpu = await handle;
  assertSame(handle.stats().bytesStaged, pageable, "only the pageable leaves were staged");
  sameLeaves(batch, onGpu as unknown as Record<string, DeviceTensor>);
  // Arena leaves share one device block, at the host's distances.
  const arenaKeys = Object.keys(batch).filter((k) => k.startsWith("a"));
  const first = (onGpu as Record<string, DeviceTensor>)[arenaKeys[0]!]!;
  for (const key of arenaKeys) assertSame((onGpu as Record<string, DeviceTensor>)[key]!.block, first.block, key);
  disposeAll(onGpu);
});

pinnedTest("reset waits for the copy that reads the arena, then empties the old views", async () => {
  using arena = Arena.create(4096);
  const a = arena.array("uint8", 1000);
  a.fill(7);
  await withCopyDelay(150_000, async () => { // long enough that a late timer still finds the copy running
    const handle = startCopy({ a }, "cuda:0");
    assert(arena.busy, "busy while the copy reads it");
    assertSame(arena.tryReset(), false, "tryReset refuses while busy");
    assertSame(a.length, 1000, "views intact while busy");
    const reset = arena.reset();
    let resetDone = false;
    void reset.then(() => (resetDone = true));
    await new Promise((r) => setTimeout(r, 5));
    assert(!resetDone, "reset still waiting for the copy");
    await reset;
    assert(!arena.busy, "idle after reset");
    assertSame(a.length, 0, "a view from before the reset is empty");
    const b = arena.array("uint8", 1000); // the same bytes of pinned memory as `a`
    b.fill(1);
    // A stale view: writes go nowhere (or throw a TypeError), never into the next batch.
    a[0] = 99;
    try {
      a.fill(98);
    } catch (e) {
      assert(e instanceof TypeError, String(e));
    }
    assertSame(b[0], 1, "a write through a view from before the reset does not reach the next batch");
    assertSame(b[999], 1);
    const onGpu = await handle;
    assertEquals(Array.from(onGpu.a.toHost() as Uint8Array).slice(0, 3), [7, 7, 7], "the copy has the first batch");
    disposeAll(onGpu);
  });
});

pinnedTest("an arena disposed while a copy reads it: the copy completes exactly, memory comes back after", async () => {
  const before = poolStats();
  const arena = Arena.create(100_000);
  const x = arena.tensor("float64", [1000]);
  (x.data as Float64Array).set(Float64Array.from({ length: 1000 }, (_, i) => i + 0.25));
  const expected = (x.data as Float64Array).slice();
  await withCopyDelay(20_000, async () => {
    const handle = startCopy(x, "cuda:0");
    arena.dispose();
    assertSame(x.data.length, 0, "views empty on dispose");
    const onGpu = await handle;
    assertEquals(Array.from(onGpu.toTensor().data as Float64Array), Array.from(expected));
    onGpu.dispose();
  });
  assertSame(poolStats().pinnedHeldBytes, before.pinnedHeldBytes);
  assertThrows(() => arena.tensor("uint8", [1]), MtcError, "disposed");
});

pinnedTest("Arena.array and Arena.tensor: each dtype's storage at 16-byte steps; bad input refused with MtcError, nothing taken", () => {
  using arena = Arena.create(4096);
  const kinds: [string, string, number][] = [
    ["float32", "Float32Array", 3], ["int64", "BigInt64Array", 3], ["uint8", "Uint8Array", 3], ["bool", "Uint8Array", 3],
    ["int32", "Int32Array", 3], ["float64", "Float64Array", 3], ["complex64", "Float32Array", 6], ["complex128", "Float64Array", 6],
    ["int16", "Int16Array", 3], ["bfloat16", "Uint16Array", 3], ["uint64", "BigUint64Array", 3],
  ];
  for (const [dtype, kind, values] of kinds) {
    const used = arena.used;
    const a = arena.array(dtype as "float32", 3);
    assertSame(a.constructor.name, kind, dtype);
    assertSame(a.length, values, dtype);
    assertSame(a.byteOffset, Math.ceil(used / 16) * 16, `${dtype} at the next multiple of 16`);
  }
  const used = arena.used;
  const bad = (fn: () => unknown, code: string, includes: string) => {
    const e = assertThrows(fn, MtcError, includes);
    assertSame(e.code, code, e.message);
    assertSame(arena.used, used, "nothing taken");
  };
  for (const length of [-1, 1.5, NaN, "3", 2 ** 53]) {
    bad(() => arena.array("float32", length as number), "MTC_ERR_INVALID_ARGUMENT", "Arena.array: the length must be an integer >= 0");
  }
  bad(() => arena.array("float33" as "float32", 3), "MTC_ERR_INVALID_ARGUMENT", 'Arena.array: unknown dtype "float33"');
  bad(() => arena.array("complex128", 2 ** 50), "MTC_ERR_INVALID_ARGUMENT", "Arena.array: shape [1125899906842624] of complex128 is too large");
  bad(() => arena.array("int8", 4097), "MTC_ERR_OUT_OF_MEMORY", "Arena.array: 4097 bytes do not fit the arena");
  bad(() => arena.tensor("float32", [2, -1]), "MTC_ERR_INVALID_ARGUMENT", "Arena.tensor: the shape must be an array of integers >= 0, got [2, -1]");
  bad(() => arena.tensor("float64", [2 ** 26, 2 ** 26]), "MTC_ERR_INVALID_ARGUMENT", "Arena.tensor: shape [67108864, 67108864] of float64 is too large");
  bad(() => arena.tensor("int16", [2048, 2]), "MTC_ERR_OUT_OF_MEMORY", "Arena.tensor: 8192 bytes do not fit the arena");
  const t = arena.tensor("complex64", [2, 2]);
  assertEquals([t.dtype, [...t.shape], t.data.length, t.size], ["complex64", [2, 2], 8, 4]);
  arena.dispose();
  const e = assertThrows(() => arena.array("uint8", 1), MtcError, "Arena.array: the arena was disposed");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
});

pinnedTest("consolidate writes a nested batch into the arena; the whole arena goes as one copy with twins", async () => {
  using arena = Arena.create(1 << 20);
  const batch = makeExampleBatch(2);
  const inArena = arena.consolidate(batch);
  const handle = startCopy(inArena, "cuda:0");
  const walked = await handle;
  assertSame(handle.stats().bytesStaged, 0, "no staging from an arena");
  const whole = startArenaCopy(arena, "cuda:0");
  using onDevice = await whole;
  assertSame(onDevice.byteLength, arena.used);
  const ids = (inArena as unknown as { [k: number]: { label_ids?: TypedArray } });
  void ids;
  // Every leaf's twin equals the walked copy's leaf.
  const leaves: [TypedArray | Tensor, DeviceTensor][] = [];
  const walk = (a: unknown, b: unknown) => {
    if (a instanceof Tensor || ArrayBuffer.isView(a)) leaves.push([a as TypedArray | Tensor, b as DeviceTensor]);
    else if (Array.isArray(a)) a.forEach((v, i) => walk(v, (b as unknown[])[i]));
    else if (a instanceof Map) for (const [k, v] of a) walk(v, (b as Map<unknown, unknown>).get(k));
    else if (typeof a === "object" && a !== null) for (const k of Object.keys(a)) walk((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]);
  };
  walk(inArena, walked);
  assert(leaves.length > 100, `example batch leaves: ${leaves.length}`);
  for (const [leaf, copied] of leaves.slice(0, 60)) {
    using twin = arena.twin(onDevice, leaf);
    assertEquals(bytesOf(twin.toTensor().data), bytesOf(copied.toTensor().data));
  }
  disposeAll(walked);
  await arena.reset();
  // A leaf from before the reset: its memory was given back, a use after dispose.
  assertSame(assertThrows(() => arena.twin(onDevice, leaves[0]![0]), MtcError, "pinned memory was released").code, "MTC_ERR_INVALID_STATE");
});

pinnedTest("consolidate refuses what does not fit, taking nothing; strided tensors with their path", () => {
  using arena = Arena.create(1000);
  const err = assertThrows(() => arena.consolidate({ a: new Uint8Array(600), b: new Uint8Array(600) }), MtcError, "needs");
  assertSame(err.status, Status.MTC_ERR_OUT_OF_MEMORY);
  assertSame(arena.used, 0);
  const strided = new Tensor(new Float32Array(8), [2, 2], "float32", { strides: [4, 1] });
  assertThrows(() => arena.consolidate({ x: [strided] }), MtcError, "batch.x[0]");
});

pinnedTest("consolidate reads each leaf once: a getter that detaches an earlier leaf's buffer, or a reassigned shape, is an MtcError with the path; nothing taken", () => {
  using arena = Arena.create(1 << 16);
  const early = new Float32Array(8).fill(1);
  const batch = {
    a: early,
    get b() {
      (early.buffer as ArrayBuffer).transfer(); // detaches a's buffer after it was read
      return new Float32Array(4);
    },
  };
  assertThrows(() => arena.consolidate(batch), MtcError, "batch.a: its buffer was detached");
  assertSame(arena.used, 0, "nothing taken");
  const t = new Tensor(new Float32Array(6), [2, 3]);
  (t as { shape: readonly number[] }).shape = [100, 100];
  const copy = arena.consolidate({ t }) as { t: Tensor };
  assertEquals(copy.t.shape, [2, 3], "the shape the constructor froze");
});

pinnedTest("the held limit is its own: refused with a message naming it, nothing leaks", async () => {
  const before = poolStats();
  setPinnedHeldLimit(2 << 20);
  try {
    const a = Arena.create(1 << 20);
    const err = assertThrows(() => Arena.create(2 << 20), MtcError, "MTC_PINNED_HELD_LIMIT");
    assertSame(err.status, Status.MTC_ERR_OUT_OF_MEMORY);
    assertThrows(() => pinnedTensor("float32", [1 << 20]), MtcError, "held by tensors and arenas");
    a.dispose();
    using b = Arena.create(1 << 20);
    assertSame(b.capacity, 1 << 20);
  } finally {
    setPinnedHeldLimit(before.pinnedHeldLimitBytes);
  }
  assertSame(poolStats().pinnedHeldBytes, before.pinnedHeldBytes);
  await assertRejects(async () => {
    const gone = Arena.create(100);
    gone.dispose();
    await gone.reset();
  }, MtcError);
});

pinnedTest("copyInto from a GPU into arena destinations: written in place (no copy-out), exact; mixed destinations too", async () => {
  const batch: Record<string, TypedArray | Tensor> = {};
  DTYPES.forEach((dtype, k) => (batch[dtype] = randomLeaf(dtype, [1 + (k * 5) % 11, 2], 40 + k)));
  const onGpu = await startCopy(batch, "cuda:0");
  using arena = Arena.create(1 << 20);
  // All destinations in the arena: the GPU writes them in place.
  const dest = arena.consolidate(batch);
  for (const key of Object.keys(dest)) bytesOf(dest[key]!).fill(0);
  await withCopyDelay(20_000, async () => {
    const handle = copyInto(onGpu, dest);
    assert(arena.busy, "the arena is busy while the GPU writes it");
    await handle;
    assertSame(handle.stats().leavesDirect, Object.keys(batch).length);
    assertSame(handle.stats().bytesStaged, 0);
  });
  for (const key of Object.keys(batch)) assertEquals(bytesOf(dest[key]!), bytesOf(batch[key]!), key);
  // Half in the arena, half pageable: every byte lands, by whichever path.
  const mixed: Record<string, TypedArray | Tensor> = {};
  Object.keys(batch).forEach((key, k) => {
    const leaf = batch[key]!;
    const shape = leaf instanceof Tensor ? leaf.shape : [leaf.length];
    mixed[key] = k % 2 === 0 ? arena.tensor(leaf instanceof Tensor ? leaf.dtype : "uint8", shape) : randomLeaf(leaf instanceof Tensor ? leaf.dtype : "uint8", shape, 99);
  });
  await copyInto(onGpu, mixed);
  for (const key of Object.keys(batch)) assertEquals(bytesOf(mixed[key]!), bytesOf(batch[key]!), `mixed ${key}`);
  disposeAll(onGpu);
});

pinnedTest("a pinned destination released while the GPU writes it: an MtcError naming it, nothing freed under the copy; the same for a disposed arena", async () => {
  const source = await startCopy({ x: randomLeaf("float32", [4096, 2], 3) }, "cuda:0");
  const before = poolStats();
  await withCopyDelay(20_000, async () => {
    const dest = { x: pinnedTensor("float32", [4096, 2]) };
    const handle = copyInto(source, dest);
    dest.x.dispose(); // while the copy writes it
    assert(poolStats().pinnedHeldBytes > before.pinnedHeldBytes, "the copy still holds the block");
    const err = await assertRejects(async () => await handle, MtcError);
    assert(err.message.includes(".x"), err.message);
    handle.dispose();
  });
  await withCopyDelay(20_000, async () => {
    const arena = Arena.create(1 << 20);
    const dest = arena.consolidate({ x: randomLeaf("float32", [4096, 2], 4) });
    const handle = copyInto(source, dest);
    arena.dispose();
    await assertRejects(async () => await handle, MtcError);
    handle.dispose();
  });
  // (At most: the garbage collector may give back blocks of earlier tests meanwhile.)
  const after = poolStats().pinnedHeldBytes;
  assert(after <= before.pinnedHeldBytes, `every block came back once the copies were over: ${after} > ${before.pinnedHeldBytes}`);
  disposeAll(source);
});

test("pinned: without a CUDA driver, pinned tensors and arenas are pageable memory with the same API; copies to cpu work", async () => {
  const r = await runScript(new URL("./fixtures/pinned_no_driver.ts", import.meta.url).pathname, [], { MTC_CUDA_DRIVER: "/nonexistent/libcuda.so.1" });
  assertSame(r.code, 0, r.stderr);
  const got = new Map(r.stdout.trim().split("\n").map((l) => [l.slice(0, l.indexOf(": ")), l.slice(l.indexOf(": ") + 2)]));
  const expected: [string, string][] = [
    ["reason", "true"],
    ["pinnedTensor", "[400,7,false,8]"],
    ["pinnedArray", "[1,2,3]"],
    ["arena", "[[3,3,3,3],[1,2],true]"],
    ["copy to cpu", "[7,3,3,true]"],
    ["arena copy to cpu", "44"],
    ["held", "0"],
    ["moved", "[6,6]"],
    ["after reset", "[0,true]"],
    ["after dispose", "[0,true]"],
  ];
  for (const [name, value] of expected) assertSame(got.get(name), value, `${name}: ${r.stdout}`);
  assert(got.get("copy to cuda:0")?.startsWith("MTC_ERR_NO_DRIVER: ") === true, r.stdout);
  assert(got.get("copy after dispose")?.startsWith("MTC_ERR_INVALID_STATE: .boxes: the Tensor's pinned memory was released") === true, r.stdout);
  assert(got.get("device cpu")?.startsWith("MTC_ERR_INVALID_ARGUMENT: ") === true, r.stdout);
});
