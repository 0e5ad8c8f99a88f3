// The GPU suite: run on a CUDA host (H100/H200) with the built libmtc.so:
//   node_modules/.bin/bun test tests/gpu
//   node_modules/.bin/deno test --allow-ffi --allow-env --allow-read tests/gpu
// With MTC_CUDA_DRIVER set (e.g. to zig-out/lib/libfakecuda.so) the emulated
// driver counts as a CUDA host. Without a device the suite prints one line
// "GPU suite skipped: <reason>" and skips, unless MTC_REQUIRE_GPU=1: then it fails.
import {
  cudaDeviceCount,
  DeviceTensor,
  hasKernels,
  isPinnedHostOutput,
  disposeAll,
  poolStats,
  releaseHostOutput,
  startCopy,
  Tensor,
  type TypedArray,
} from "../../ts/mod.ts";
import { EXAMPLE_BATCH_TENSORS, forEachLeaf, makeExampleBatch, seededRandom } from "../../examples/example_batch.ts";
import { assert, assertEquals, assertSame, note } from "../ts/harness.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";
import { bytesOf, DTYPES, elementSize, randomLeaf } from "../ts/random_tensors.ts";

gpuTest("every dtype round-trips exactly (random data)", async () => {
  const inputs = DTYPES.flatMap((dtype, i) => [
    randomLeaf(dtype, [1001], 1000 + i),
    randomLeaf(dtype, [17, 9], 2000 + i),
    randomLeaf(dtype, [70_000], 3000 + i), // above the packing threshold for 8-byte dtypes
  ]);
  for (const input of inputs) assert(bytesOf(input).some((b) => b !== 0), "random, not zeros");
  const onGpu = await startCopy(inputs, DEVICE);
  const back = await startCopy(onGpu, "cpu");
  assertSame(back.length, inputs.length);
  back.forEach((host, i) => {
    const input = inputs[i]!;
    assertSame(host.constructor, input.constructor);
    assertEquals(bytesOf(host), bytesOf(input), `leaf ${i} (${onGpu[i]!.dtype} ${JSON.stringify(onGpu[i]!.shape)})`);
    if (input instanceof Tensor) assertEquals((host as Tensor).shape, input.shape);
  });
  disposeAll([onGpu, back]);
});

gpuTest("packed outputs share one block and are aligned to max(16, element size)", async () => {
  const inputs = DTYPES.map((dtype, i) => randomLeaf(dtype, [3 + i], 50 + i));
  const out = await startCopy(inputs, DEVICE);
  const block = out[0]!.block;
  assert(block !== 0);
  for (const t of out) {
    assert(t.packed, `${t.dtype} packed`);
    assertSame(t.block, block, `${t.dtype} shares the block`);
    assertSame(t.address % Math.max(16, elementSize(t.dtype)), 0, `${t.dtype} at ${t.address.toString(16)}`);
  }
  const sorted = out.map((t) => [t.offset, t.byteLength] as const).sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < sorted.length; i++) assert(sorted[i]![0] >= sorted[i - 1]![0] + sorted[i - 1]![1], "no overlap");
  out.forEach((t, i) => assertEquals(bytesOf(t.toHost()), bytesOf(inputs[i]!)));
  disposeAll(out);
});

gpuTest("a 40 MiB float32 leaf round-trips", async () => {
  const count = (40 << 20) / 4;
  const input = new Float32Array(count);
  const words = new Uint32Array(input.buffer);
  const random = seededRandom(40);
  for (let i = 0; i < count; i++) words[i] = (random() * 4294967296) >>> 0;
  const t = await startCopy(input, DEVICE);
  assert(!t.packed);
  assertSame(t.byteLength, 40 << 20);
  const back = t.toHost() as Float32Array;
  assertEquals(new Uint32Array(back.buffer), words);
  t.dispose();
});

gpuTest("leaves already on the GPU are reused (the same object)", async () => {
  const a = await startCopy(randomLeaf("float32", [8], 1), DEVICE);
  const mixed = { a, b: new Int32Array([1, 2]), n: 3 };
  const out = await startCopy(mixed, DEVICE);
  assertSame(out.a, a);
  assert(out.b instanceof DeviceTensor);
  assertSame(out.n, 3);
  disposeAll(out);
});

gpuTest("16 handles in flight at once, all correct", async () => {
  const inputs = Array.from({ length: 16 }, (_, i) => makeExampleBatch(500 + i));
  const handles = inputs.map((b) => startCopy(b, DEVICE));
  const outs = await Promise.all(handles);
  for (let i = 0; i < 16; i++) {
    const back = await startCopy(outs[i], "cpu");
    assertEquals(back, inputs[i]);
    releaseHostOutput(back);
    handles[i]!.dispose();
    disposeAll(outs[i]);
  }
});

gpuTest("dispose without get frees everything", () => {
  const before = poolStats();
  for (let i = 0; i < 8; i++) startCopy(makeExampleBatch(i), DEVICE).dispose();
  const after = poolStats();
  assertSame(after.plansLive, before.plansLive);
  assertSame(after.blocksLive, before.blocksLive);
  assertSame(after.deviceBytesLive, before.deviceBytesLive);
});

gpuTest("the example batch copies and every leaf matches", async () => {
  const batch = makeExampleBatch(2024);
  const onGpu = await startCopy(batch, DEVICE);
  const expected: [string, Uint8Array][] = [];
  forEachLeaf(batch, (leaf, path) => expected.push([path, bytesOf(leaf as TypedArray | Tensor)]));
  const got: [string, DeviceTensor][] = [];
  forEachLeaf(onGpu, (leaf, path) => got.push([path, leaf as DeviceTensor]));
  assertSame(got.length, EXAMPLE_BATCH_TENSORS);
  got.forEach(([path, t], i) => {
    assertSame(path, expected[i]![0]);
    assert(t instanceof DeviceTensor && t.device === DEVICE, path);
    assertEquals(bytesOf(t.toTensor()), expected[i]![1], path);
  });
  const back = await startCopy(onGpu, "cpu");
  assertEquals(back, batch);
  disposeAll([onGpu, back]);
});

gpuTest("device to device: cuda:0 → cuda:1", async () => {
  const inputs = DTYPES.map((dtype, i) => randomLeaf(dtype, [257], 700 + i));
  const on0 = await startCopy(inputs, "cuda:0");
  const on1 = await startCopy(on0, "cuda:1");
  on1.forEach((t, i) => {
    assert(t !== on0[i] && t.device === "cuda:1", "a new DeviceTensor on cuda:1");
    assertEquals(bytesOf(t.toHost()), bytesOf(inputs[i]!));
  });
  assertSame((await startCopy(on1, "cuda:1"))[0], on1[0], "reused on its own device");
  disposeAll(on0);
  disposeAll(on1);
}, { gpus: 2 });

// ------------------------------------------------------ every direction

gpuTest("host → device: every dtype, packed and unpacked, exact", async () => {
  const inputs = DTYPES.flatMap((dtype, i) => [randomLeaf(dtype, [5], 60 + i), randomLeaf(dtype, [40_000], 80 + i)]);
  const h = startCopy(inputs, DEVICE, { packThresholdBytes: 64 << 10 });
  const onGpu = await h;
  const stats = h.stats();
  assertSame(stats.leaves, inputs.length);
  assert(stats.leavesPacked >= DTYPES.length, `packed ${stats.leavesPacked}`);
  assertSame(stats.bytesCopied, inputs.reduce((n, x) => n + bytesOf(x).length, 0));
  assertSame(stats.deviceToHostPath, "none");
  h.dispose();
  onGpu.forEach((t, i) => assertEquals(bytesOf(t.toTensor()), bytesOf(inputs[i]!), `leaf ${i}`));
  disposeAll(onGpu);
});

gpuTest("device → host: zero-copy pinned outputs, exact, and the path taken", async () => {
  const inputs = DTYPES.flatMap((dtype, i) => [randomLeaf(dtype, [3 + i], 90 + i), randomLeaf(dtype, [6, 7], 110 + i)]);
  inputs.push(randomLeaf("float32", [1 << 20], 130)); // 4 MiB
  const onGpu = await startCopy(inputs, DEVICE);
  const before = poolStats();
  const h = startCopy(onGpu, "cpu");
  const back = await h;
  back.forEach((leaf, i) => {
    assert(isPinnedHostOutput(leaf), `leaf ${i} views pinned memory`);
    assertEquals(bytesOf(leaf), bytesOf(inputs[i]!), `leaf ${i}`);
  });
  const path = h.stats().deviceToHostPath;
  note(`gpu: device → host path: ${path} (kernels: ${hasKernels() ? "yes" : "no"})`);
  if (hasKernels()) assertSame(path, "gather-kernel");
  else assert(path === "per-leaf" || path === "batched", path);
  h.dispose();
  assert(releaseHostOutput(back) >= 1);
  assertSame(poolStats().blocksLive, before.blocksLive);
  assertSame(poolStats().pinnedBytesInUse, before.pinnedBytesInUse);
  disposeAll(onGpu);
});

gpuTest("device → same device: reused as they are, nothing copied", async () => {
  const onGpu = await startCopy([randomLeaf("int32", [100], 5), randomLeaf("float64", [7], 6)], DEVICE);
  const h = startCopy({ x: onGpu, n: 1 }, DEVICE);
  const out = await h;
  assertSame(out.x[0], onGpu[0]);
  assertSame(out.x[1], onGpu[1]);
  assertSame(h.stats().leavesReused, 2);
  assertSame(h.stats().bytesCopied, 0);
  assertSame(await startCopy(onGpu[0]!, "cuda"), onGpu[0], '"cuda" is the current device, cuda:0');
  disposeAll(onGpu);
});

gpuTest("mixed sources to one device: host leaves and DeviceTensors of every GPU, exact", async () => {
  const devices = cudaDeviceCount() >= 2 ? ["cuda:0", "cuda:1"] as const : ["cuda:0"] as const;
  const host = randomLeaf("float32", [1000], 7) as Float32Array;
  const per = devices.map((d, i) => ({ d, input: randomLeaf("int64", [33 + i], 8 + i) }));
  const on = await Promise.all(per.map(({ d, input }) => startCopy(input, d).then((t) => t)));
  for (const target of devices) {
    const out = await startCopy({ host, on, keep: "k" }, target);
    assertSame(out.keep, "k");
    assertEquals(bytesOf(out.host.toHost()), bytesOf(host));
    out.on.forEach((t, i) => {
      assertSame(t.device, target);
      assertEquals(bytesOf(t.toTensor()), bytesOf(per[i]!.input), `from ${per[i]!.d} to ${target}`);
    });
    disposeAll([out.host, out.on.filter((t, i) => t !== on[i])]);
  }
  const back = await startCopy({ host, on }, "cpu");
  assertSame(back.host, host);
  back.on.forEach((leaf, i) => assertEquals(bytesOf(leaf), bytesOf(per[i]!.input)));
  disposeAll([on, back]);
});
