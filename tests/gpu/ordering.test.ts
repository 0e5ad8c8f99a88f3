// Stream ordering on a CUDA host, with libmtc's debug kernels (a kernel that
// spins then fills, a kernel that copies): copies read GPU sources after the
// work queued on their stream, the caller's stream waits for copies (and
// never the other way round), across two GPUs where there are two. Also
// ToDevice and prefetch on the device. Skips, saying so, without a GPU, with
// one GPU for the two-GPU tests, and without kernels for the kernel tests.
import {
  DeviceTensor,
  disposeAll,
  poolStats,
  prefetch,
  releaseHostOutput,
  startCopy,
  Stream,
  ToDevice,
  withStream,
} from "../../ts/mod.ts";
import { debugCopy, debugFill } from "../../ts/testing.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { assert, assertEquals, assertSame } from "../ts/harness.ts";
import { bytesOf, randomLeaf } from "../ts/random_tensors.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";

const SPIN_US = 200_000;

/** A device buffer of its own block, every byte `value`. */
function deviceBuffer(bytes: number, value: number, device: "cuda:0" | "cuda:1" = DEVICE): DeviceTensor {
  return startCopy(new Uint8Array(bytes).fill(value), device, { packCpuTensors: false }).get();
}

function allBytes(leaf: Parameters<typeof bytesOf>[0], value: number): boolean {
  return bytesOf(leaf).every((b) => b === value);
}

gpuTest("a source written by a long kernel on its stream just before startCopy is copied as written (to the host)", () => {
  using s = Stream.create(DEVICE);
  const src = deviceBuffer(8 << 20, 1);
  debugFill(s, src, 0x5a, { spinMicroseconds: SPIN_US });
  const back = withStream(s, () => startCopy(src, "cpu").get());
  assert(allBytes(back as Uint8Array, 0x5a), "the copy read the source after the kernel");
  releaseHostOutput(back);
  src.dispose();
}, { kernels: true });

gpuTest("the same with many small sources (the gather path), to the host", () => {
  using s = Stream.create(DEVICE);
  const srcs = Array.from({ length: 64 }, () => deviceBuffer(1000, 1));
  for (const [i, t] of srcs.entries()) debugFill(s, t, i + 2, { spinMicroseconds: i === 0 ? SPIN_US : 0 });
  const back = withStream(s, () => startCopy(srcs, "cpu").get());
  back.forEach((leaf, i) => assert(allBytes(leaf as Uint8Array, i + 2), `leaf ${i}`));
  disposeAll([srcs, back]);
}, { kernels: true });

gpuTest("two GPUs: a kernel on the SOURCE device's stream writes the source just before a copy to the other GPU", () => {
  using s0 = Stream.create("cuda:0");
  const src = deviceBuffer(16 << 20, 1, "cuda:0");
  debugFill(s0, src, 0x6b, { spinMicroseconds: SPIN_US });
  const on1 = withStream(s0, () => startCopy(src, "cuda:1").get());
  assertSame(on1.device, "cuda:1");
  assert(allBytes(on1.toHost() as Uint8Array, 0x6b), "the copy to cuda:1 saw the kernel's bytes");
  disposeAll([src, on1]);
}, { gpus: 2, kernels: true });

gpuTest("a long kernel on the target stream: get() returns before it ends; a kernel queued after reads the copy", () => {
  using t = Stream.create(DEVICE);
  const scratch = deviceBuffer(256, 0);
  const input = randomLeaf("uint8", [1 << 20], 3) as Uint8Array;
  const dst = deviceBuffer(input.byteLength, 0);
  debugFill(t, scratch, 1, { spinMicroseconds: SPIN_US });
  const h = withStream(t, () => startCopy(input, DEVICE));
  const out = h.get(); // this copy only
  // Recorded after get() returned, behind the kernel: not complete, so get() did not wait for it.
  using queued = t.recordEvent();
  assert(!queued.query(), "the kernel was still running when get() returned");
  debugCopy(t, dst, out);
  t.synchronize();
  assertEquals(dst.toHost(), input);
  h.dispose();
  disposeAll([scratch, dst, out]);
}, { kernels: true });

gpuTest("two GPUs: the target's stream waits for a copy that waits for the source's stream", () => {
  using s1 = Stream.create("cuda:1");
  using t0 = Stream.create("cuda:0");
  const src = deviceBuffer(4 << 20, 1, "cuda:1");
  const dst = deviceBuffer(4 << 20, 0, "cuda:0");
  debugFill(s1, src, 0x42, { spinMicroseconds: SPIN_US });
  // Results come only once the copy is done, so the proof that t0 waits is
  // that an event recorded on the otherwise idle t0 right after startCopy is
  // not complete while the copy still waits for cuda:1's kernel.
  const h = withStream(s1, () => withStream(t0, () => startCopy(src, "cuda:0")));
  using queued = t0.recordEvent();
  assertSame(queued.query(), false, "t0 waits for the copy, which waits for the kernel on cuda:1");
  const out = h.get();
  debugCopy(t0, dst, out);
  t0.synchronize();
  assert(allBytes(dst.toHost() as Uint8Array, 0x42));
  h.dispose();
  disposeAll([src, dst, out]);
}, { gpus: 2, kernels: true });

gpuTest("a wrapped stream (as from another library) works like a created one", () => {
  using mine = Stream.create(DEVICE);
  const wrapped = Stream.wrap(BigInt(mine.handle), DEVICE);
  const out = withStream(wrapped, () => startCopy(new Float32Array([1, 2, 3]), DEVICE).get());
  wrapped.synchronize();
  assertEquals(out.toHost(), new Float32Array([1, 2, 3]));
  wrapped.dispose();
  mine.synchronize();
  out.dispose();
});

gpuTest("ToDevice: host → GPU → host, exact, with a compute stream", () => {
  const batch = makeExampleBatch(31);
  using c0 = Stream.create("cuda:0");
  const toGpu = new ToDevice("cpu", { device: "cuda:0", computeStream: c0 });
  const on0 = toGpu.forward(batch);
  const back = new ToDevice("cuda:0", "cpu").forward(on0);
  assertEquals(back, batch);
  assertSame(toGpu.normal().forward(batch), batch);
  disposeAll([on0, back]);
});

gpuTest("ToDevice: host → GPU → other GPU → host, exact, with compute streams", async () => {
  const batch = makeExampleBatch(31);
  using c0 = Stream.create("cuda:0");
  using c1 = Stream.create("cuda:1");
  const on0 = new ToDevice("cpu", { device: "cuda:0", computeStream: c0 }).forward(batch);
  const across = new ToDevice({ device: "cuda:0", computeStream: c0 }, { device: "cuda:1", computeStream: c1 });
  const on1 = await across.forwardAsync(on0);
  c1.synchronize();
  assertSame(on1[0]!.gt_data.class_ids.device, "cuda:1");
  const back = new ToDevice("cuda:1", "cpu").forward(on1);
  assertEquals(back, batch);
  disposeAll([on0, on1, back]);
}, { gpus: 2 });

gpuTest("prefetch: order, bounded in flight, nothing left after an early break", async () => {
  const before = poolStats();
  const batches = Array.from({ length: 12 }, (_, i) => makeExampleBatch(200 + i));
  let i = 0;
  for await (const b of prefetch(batches, DEVICE, { depth: 3 })) {
    assert(poolStats().plansLive - before.plansLive <= 3);
    const back = await startCopy(b, "cpu");
    assertEquals(back, batches[i]);
    disposeAll([b, back]);
    if (++i === 8) break;
  }
  assertSame(poolStats().plansLive, before.plansLive);
  assertSame(poolStats().blocksLive, before.blocksLive);
});
