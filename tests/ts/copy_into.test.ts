// copyInto through the emulated driver (two devices): every direction
// byte-exact against random data, every dtype, packed and unpacked leaves,
// destinations that are views into one block and destinations in blocks of
// their own; and every error, with its path and nothing copied. Skipped,
// saying so, when MTC_CUDA_DRIVER is unset.
import { copyInto, type DeviceTensor, disposeAll, MtcError, startCopy, Stream, Tensor, type TypedArray, withStream } from "../../ts/mod.ts";
import { debugFill } from "../../ts/testing.ts";
import { canCollectGarbage, collectGarbage, fakeDriver, skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { bytesOf, DTYPES, randomLeaf } from "./random_tensors.ts";
import { batch as stridedBatch, checkDense, THRESHOLD as STRIDED_THRESHOLD } from "./strided_tensors.ts";

const skip = skipWithoutDriver;
const intoTest = (name: string, fn: () => void | Promise<void>) => test(`copyInto: ${name}`, fn, { skip });

type HostLeaf = TypedArray | Tensor;
type Batch = Record<string, HostLeaf>;

/** A batch of every dtype, 1-D and 2-D, plus one leaf past the packing threshold (300 KiB). */
function randomBatch(seed: number): Batch {
  const batch: Batch = {};
  for (const [i, dtype] of DTYPES.entries()) {
    batch[`${dtype}_v`] = randomLeaf(dtype, [3 + i], seed + 2 * i);
    batch[`${dtype}_m`] = randomLeaf(dtype, [2, 5], seed + 2 * i + 1);
  }
  batch.large = randomLeaf("float32", [300 * 256], seed + 99);
  return batch;
}

/** Zeros of the same kinds, dtypes and shapes. */
function zerosLike(batch: Batch): Batch {
  const out: Batch = {};
  for (const [key, leaf] of Object.entries(batch)) {
    const data = leaf instanceof Tensor ? leaf.data : leaf;
    const zeros = new (data.constructor as new (n: number) => TypedArray)(data.length);
    out[key] = leaf instanceof Tensor ? new Tensor(zeros, leaf.shape, leaf.dtype) : zeros;
  }
  return out;
}

/** Every device leaf of `onDevice` holds the bytes of the same leaf of `expected`. */
function assertHolds(onDevice: Record<string, DeviceTensor>, expected: Batch): void {
  for (const [key, leaf] of Object.entries(expected)) {
    assertEquals(bytesOf(onDevice[key]!.toHost()), bytesOf(leaf), key);
  }
}

/** Device buffers of the batch's shapes: views into one block (packed) or blocks of their own. */
async function deviceBuffers(like: Batch, device: "cuda:0" | "cuda:1", packed: boolean): Promise<Record<string, DeviceTensor>> {
  return await startCopy(zerosLike(like), device, { packCpuTensors: packed }) as unknown as Record<string, DeviceTensor>;
}

for (const packed of [true, false]) {
  const views = packed ? "views into one block" : "blocks of their own";
  intoTest(`host -> GPU into ${views}, every dtype, byte-exact`, async () => {
    const source = randomBatch(10);
    const buffers = await deviceBuffers(source, "cuda:0", packed);
    const addresses = Object.values(buffers).map((t) => t.address);
    assertSame(buffers.int8_v!.block === buffers.int16_v!.block, packed);
    const h = copyInto(source, buffers);
    assertSame(await h, buffers, "the destination itself comes back");
    assertEquals(Object.values(buffers).map((t) => t.address), addresses);
    assertHolds(buffers, source);
    assertSame(h.stats().leavesReused, 0);
    h.dispose();
    // Again into the same buffers, with other data: what a decode step does;
    // and with each option that changes the path (pageable staging, no packing).
    const options = [{ useBackgroundThread: false }, { usePinnedStaging: false }, { packCpuTensors: false }, { packThresholdBytes: 0 }];
    for (const [k, o] of options.entries()) {
      const next = randomBatch(20 + k);
      copyInto(next, buffers, o).get();
      assertHolds(buffers, next);
    }
    disposeAll(buffers);
  });

  intoTest(`GPU -> host from ${views}, into typed arrays and Tensors`, async () => {
    const source = randomBatch(30);
    const onGpu = await startCopy(source, "cuda:0", { packCpuTensors: packed }) as unknown as Record<string, DeviceTensor>;
    const out = zerosLike(source);
    assertSame(await copyInto(onGpu, out), out);
    for (const key of Object.keys(source)) assertEquals(bytesOf(out[key]!), bytesOf(source[key]!), key);
    disposeAll(onGpu);
  });

  intoTest(`GPU -> GPU into ${views}: the same device and another`, async () => {
    const source = randomBatch(40);
    for (const from of ["cuda:0", "cuda:1"] as const) {
      const onGpu = await startCopy(source, from) as unknown as Record<string, DeviceTensor>;
      const buffers = await deviceBuffers(source, "cuda:0", packed);
      assertSame(await copyInto(onGpu, buffers), buffers);
      assertHolds(buffers, source);
      disposeAll([onGpu, buffers]);
    }
  });
}

intoTest("GPU -> host into views of one ArrayBuffer", async () => {
  const source = randomBatch(35);
  const keys = Object.keys(source);
  const total = keys.reduce((sum, k) => sum + bytesOf(source[k]!).length, 0);
  const arena = new ArrayBuffer(total + 64);
  const out: Record<string, Uint8Array> = {};
  let at = 0;
  for (const k of keys) {
    const n = bytesOf(source[k]!).length;
    out[k] = new Uint8Array(arena, at, n);
    at += n;
  }
  // Bytes go as uint8: the destinations must then be uint8 of the same shape.
  const asBytes: Record<string, Uint8Array> = {};
  for (const k of keys) asBytes[k] = bytesOf(source[k]!);
  const bytesOnGpu = await startCopy(asBytes, "cuda:0");
  await copyInto(bytesOnGpu, out);
  for (const k of keys) assertEquals(out[k], bytesOf(source[k]!), k);
  assertEquals(new Uint8Array(arena, total), new Uint8Array(64), "nothing written past the last view");
  disposeAll(bytesOnGpu);
});

intoTest("host -> host, and mixed sources (host and cuda:1) into cuda:0", async () => {
  const source = randomBatch(50);
  const out = zerosLike(source);
  await copyInto(source, out);
  for (const key of Object.keys(source)) assertEquals(bytesOf(out[key]!), bytesOf(source[key]!), key);

  const half = await startCopy({ a: source.float32_m!, b: source.int64_v! }, "cuda:1");
  const mixed = { host: source.uint8_m!, gpu: half, nested: [source.bool_v!, 7, "text"] };
  const buffers = await startCopy({ host: zerosLike(source).uint8_m!, gpu: { a: zerosLike(source).float32_m!, b: zerosLike(source).int64_v! }, nested: [zerosLike(source).bool_v!] }, "cuda:0");
  await copyInto(mixed, buffers);
  assertEquals(bytesOf(buffers.host.toHost()), bytesOf(source.uint8_m!));
  assertEquals(bytesOf(buffers.gpu.a.toHost()), bytesOf(source.float32_m!));
  assertEquals(bytesOf(buffers.gpu.b.toHost()), bytesOf(source.int64_v!));
  assertEquals(bytesOf(buffers.nested[0]!.toHost()), bytesOf(source.bool_v!));
  disposeAll([half, buffers]);
});

intoTest("packed host leaves: a small chunk is one scatter launch reading pinned staging; a larger one, or pageable staging, one DMA and one launch; no allocation kept", async () => {
  const fake = fakeDriver()!;
  const cases = [
    { name: "small, pinned", n: [3, 2, 1], options: {}, dmas: 0, issued: 1 },
    { name: "small, pageable staging", n: [3, 2, 1], options: { usePinnedStaging: false }, dmas: 1, issued: 2 },
    { name: "over 64 KiB, pinned", n: [12_000, 6_000, 1], options: {}, dmas: 1, issued: 2 },
  ];
  for (const { name, n, options, dmas, issued } of cases) {
    const source = { a: Int32Array.from({ length: n[0]! }, (_, i) => i + 1), b: Float64Array.from({ length: n[1]! }, (_, i) => i / 2), c: new Uint8Array(n[2]!).fill(6) };
    const buffers = await startCopy({ a: new Int32Array(n[0]!), b: new Float64Array(n[1]!), c: new Uint8Array(n[2]!) }, "cuda:0");
    const allocations = fake.liveDeviceAllocations();
    const copies = fake.copyCount();
    const h = copyInto(source, buffers, options);
    await h;
    assertSame(fake.copyCount() - copies, dmas, `${name}: DMAs`);
    assertSame(h.stats().copiesIssued, issued, `${name}: operations (the DMA if any, and the scatter launch)`);
    h.dispose(); // a scratch block goes with the plan
    assertSame(fake.liveDeviceAllocations(), allocations, `${name}: no allocation kept`);
    assertEquals(bytesOf(buffers.a.toHost() as Int32Array), bytesOf(source.a), `${name}: a`);
    assertEquals(bytesOf(buffers.b.toHost() as Float64Array), bytesOf(source.b), `${name}: b`);
    assertEquals(bytesOf(buffers.c.toHost() as Uint8Array), bytesOf(source.c), `${name}: c`);
    disposeAll(buffers);
  }
});

intoTest("destinations and sources stay alive until the copy is over", async () => {
  const source = randomBatch(60);
  const buffers = await deviceBuffers(source, "cuda:0", true);
  const fake = fakeDriver()!;
  await withCopyDelay(20_000, async () => {
    // Submitted on this thread: the scratch block is allocated by the time it returns.
    const h = copyInto(source, buffers, { useBackgroundThread: false });
    const allocations = fake.liveDeviceAllocations();
    disposeAll(buffers); // the handle still holds the block
    assertSame(fake.liveDeviceAllocations(), allocations);
    assert(!h.ready());
    await h;
    h.dispose();
    assert(fake.liveDeviceAllocations() < allocations, "freed once the copy was over");
  });
});

intoTest("a copy in flight keeps its source and destination from the garbage collector", async () => {
  assert(canCollectGarbage(), "the test runners expose the collector");
  await withCopyDelay(20_000, async () => {
    const expected: Record<string, Uint8Array> = {};
    // Neither the source nor the destination is reachable but through the handle.
    const { handle } = await (async () => {
      const source = randomBatch(80);
      for (const [key, leaf] of Object.entries(source)) expected[key] = bytesOf(leaf).slice();
      // Wrapped: an async function's result that is a thenable would be awaited.
      return { handle: copyInto(source, await deviceBuffers(source, "cuda:0", true)) };
    })();
    for (let i = 0; i < 3; i++) {
      collectGarbage();
      await tick(1);
    }
    const out = await handle;
    for (const [key, bytes] of Object.entries(expected)) assertEquals(bytesOf(out[key]!.toHost()), bytes, key);
    handle.dispose();
    disposeAll(out);
  });
});

intoTest("on a stream: written after the work queued there, and the stream waits for the copy", async () => {
  const source = { x: randomLeaf("uint8", [4096], 70) as Uint8Array, y: randomLeaf("uint8", [100], 71) as Uint8Array };
  const buffers = await startCopy({ x: new Uint8Array(4096), y: new Uint8Array(100) }, "cuda:0");
  const stream = Stream.create("cuda:0");
  debugFill(stream, buffers.x, 0xee, { spinMicroseconds: 20_000 }); // still running when the copy is queued
  const h = withStream(stream, () => copyInto(source, buffers));
  const event = h.completionEvent();
  assert(event !== null);
  event.dispose();
  await h;
  stream.synchronize();
  assertEquals(bytesOf(buffers.x.toHost() as Uint8Array), source.x);
  assertEquals(bytesOf(buffers.y.toHost() as Uint8Array), source.y);
  stream.dispose();
  disposeAll(buffers);
});

/** Throws MtcError naming `path` and leaves `unchanged` as it was. */
function assertRejected(run: () => unknown, path: string, includes: string, unchanged: Uint8Array[], code = "MTC_ERR_INVALID_ARGUMENT"): void {
  const before = unchanged.map((b) => b.slice());
  const e = assertThrows(run, MtcError, includes);
  assertSame(e.path, path);
  assertSame(e.code, code);
  unchanged.forEach((b, i) => assertEquals(b, before[i], "nothing copied"));
}

intoTest("errors name the leaf, before anything is copied", async () => {
  const src = { a: new Float32Array([1, 2]), b: [new Int32Array([3, 4])] };
  const host = { a: new Float32Array(2), b: [new Int32Array(2)] };
  const hostBytes = [bytesOf(host.a), bytesOf(host.b[0]!)];
  assertRejected(() => copyInto(src, { a: host.a, b: [] }), ".b[0]", "no destination", hostBytes);
  assertRejected(() => copyInto(src, { a: host.a }), ".b", "the destination has nothing where the source has an array", hostBytes);
  assertRejected(() => copyInto(src, { a: new Int32Array(2), b: host.b }), ".a", "dtype is int32 but the leaf's is float32", hostBytes);
  assertRejected(() => copyInto(src, { a: new Float32Array(3), b: host.b }), ".a", "shape is [3] but the leaf's is [2]", hostBytes);
  assertRejected(() => copyInto(src, { a: new Tensor(new Float32Array(2), [2, 1]), b: host.b }), ".a", "shape is [2, 1]", hostBytes);
  assertRejected(() => copyInto({ a: src.a, b: src.a }, { a: host.a, b: host.a }), ".b", "overlaps the destination of .a", hostBytes);
  const shared = new Float32Array(3);
  assertRejected(() => copyInto({ a: src.a, b: src.a }, { a: shared.subarray(0, 2), b: shared.subarray(1, 3) }), ".b", "overlaps the destination of .a", [bytesOf(shared)]);
  assertRejected(() => copyInto({ a: src.a }, { a: src.a }), ".a", "overlaps the leaf itself", hostBytes);

  const onGpu0 = await startCopy({ a: new Float32Array(2), b: [new Int32Array(2)] }, "cuda:0");
  const onGpu1 = await startCopy({ b: [new Int32Array(2)] }, "cuda:1");
  assertRejected(() => copyInto(src, { a: onGpu0.a, b: onGpu1.b }), ".b[0]", "in cuda:1 but the destinations before it are in cuda:0", []);
  assertRejected(() => copyInto(src, { a: onGpu0.a, b: [new Int32Array(2)] }), ".b[0]", "in host memory but the destinations before it are in cuda:0", []);
  assertRejected(() => copyInto({ a: src.a, b: src.a }, { a: onGpu0.a, b: onGpu0.a }), ".b", "overlaps the destination of .a", []);
  assertRejected(() => copyInto({ a: onGpu0.a }, { a: onGpu0.a }), ".a", "overlaps the leaf itself", []);
  const gone = await startCopy(new Int32Array(2), "cuda:0");
  gone.dispose();
  assertRejected(() => copyInto({ a: src.a, b: [src.b[0]!] }, { a: onGpu0.a, b: [gone] }), ".b[0]", "destination DeviceTensor was disposed", [], "MTC_ERR_INVALID_STATE");
  // Nothing was written into the device destinations either.
  assertEquals(Array.from(onGpu0.a.toHost() as Float32Array), [0, 0]);
  disposeAll([onGpu0, onGpu1]);
});

intoTest("non-tensor values are ignored; a batch without leaves gives the destination back", async () => {
  const destination = { n: 5 };
  assertSame(await copyInto({ n: 1, s: "x", nothing: null }, destination), destination);
  assertSame(destination.n, 5);
});

intoTest("strided source Tensors are copied dense into their destinations (packed and not, to cuda:0 and to the host)", async () => {
  const source = stridedBatch();
  // Dense destinations of each source's shape: device buffers made by a copy of the dense images.
  const dense: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(source)) {
    const Storage = t.data.constructor as new (n: number) => TypedArray;
    dense[name] = new Tensor(new Storage(t.byteLength / (t.data as Uint8Array).BYTES_PER_ELEMENT), t.shape, t.dtype);
  }
  for (const packThresholdBytes of [STRIDED_THRESHOLD, 0]) {
    const buffers = await startCopy(dense, "cuda:0", { packThresholdBytes }) as unknown as Record<string, DeviceTensor>;
    copyInto(source, buffers, { packThresholdBytes }).get();
    for (const [name, t] of Object.entries(source)) checkDense(buffers[name]!.toHost() as Tensor, t, `to cuda:0, threshold ${packThresholdBytes}: ${name}`);
    disposeAll(buffers);
  }
  await copyInto(source, dense);
  for (const [name, t] of Object.entries(source)) checkDense(dense[name]!, t, `to the host: ${name}`);
  // A strided Tensor cannot be written into: destinations are dense.
  const target = new Tensor(new Float32Array(4), [2, 2], "float32", { strides: [1, 2] });
  assertRejected(() => copyInto({ m: new Float32Array(4) }, { m: target }), ".m", "copyInto writes dense destinations only", [bytesOf(target.data)]);
});

intoTest("destinations out of address order are checked in full: accepted when apart, refused when they overlap", async () => {
  const buffers = await startCopy({ x: new Float32Array(4), y: new Float32Array(4) }, "cuda:0") as unknown as Record<string, DeviceTensor>;
  const source = { a: new Float32Array([1, 2, 3, 4]), b: new Float32Array([5, 6, 7, 8]) };
  await copyInto(source, { a: buffers.y, b: buffers.x }); // y lies after x: out of order, apart
  assertEquals(Array.from(buffers.y!.toHost() as Float32Array), [1, 2, 3, 4]);
  assertEquals(Array.from(buffers.x!.toHost() as Float32Array), [5, 6, 7, 8]);
  const host = new Float32Array(12);
  await copyInto(buffers, { x: host.subarray(8, 12), y: host.subarray(0, 4) });
  assertEquals(Array.from(host), [1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8]);
  const three = { a: source.a, b: source.b, c: source.a };
  assertRejected(() => copyInto(three, { a: host.subarray(8, 12), b: host.subarray(0, 4), c: host.subarray(2, 6) }), ".c", "overlaps the destination of .b", [bytesOf(host)]);
  disposeAll(buffers);
});
