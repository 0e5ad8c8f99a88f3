// Copies to "cpu" hand out views of pinned host memory (zero-copy), released
// when garbage-collected or explicitly. Emulated driver with two devices.
import {
  cudaDeviceCount,
  DeviceTensor,
  disposeAll,
  isPinnedHostOutput,
  MtcError,
  poolStats,
  type PoolStats,
  releaseHostOutput,
  startCopy,
  Tensor,
  type TypedArray,
} from "../../ts/mod.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { library } from "../../ts/ffi/library.ts";
import { canCollectGarbage, collectGarbage, skipWithoutDriver, tick } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, runner, test } from "./harness.ts";
import { bytesOf, DTYPES, randomLeaf } from "./random_tensors.ts";

/** A test; `needs` says why it cannot run here (it is then reported as skipped). */
const hostTest = (name: string, fn: () => void | Promise<void>, needs?: string) =>
  test(`host outputs: ${name}`, fn, { skip: skipWithoutDriver ?? needs });

const NEEDS_GC = canCollectGarbage() ? undefined : "needs a way to force collections (Deno: --v8-flags=--expose-gc)";

function sameCounts(after: PoolStats, before: PoolStats, what: string): void {
  assertSame(after.blocksLive, before.blocksLive, `${what}: blocksLive`);
  assertSame(after.hostBytesLive, before.hostBytesLive, `${what}: hostBytesLive`);
  assertSame(after.pinnedBytesInUse, before.pinnedBytesInUse, `${what}: pinnedBytesInUse`);
  assertSame(after.plansLive, before.plansLive, `${what}: plansLive`);
}

/** Collects until blocksLive stops changing: garbage of earlier tests (Bun runs every file in one process) is gone. */
async function settle(): Promise<void> {
  let last = -1;
  for (let i = 0, stable = 0; i < 100 && stable < 3; i++) {
    collectGarbage();
    await tick(2);
    const now = poolStats().blocksLive;
    stable = now === last ? stable + 1 : 0;
    last = now;
  }
}

async function collectUntil(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) {
    collectGarbage();
    await tick(2);
  }
}

hostTest("every dtype comes back exactly, as views of one pinned buffer", () => {
  const inputs = DTYPES.flatMap((dtype, i) => [randomLeaf(dtype, [37], 10 + i), randomLeaf(dtype, [4, 3], 40 + i)]);
  const onGpu = startCopy(inputs, "cuda:0").get();
  const before = poolStats();
  const h = startCopy(onGpu, "cpu");
  const back = h.get();
  h.dispose();
  back.forEach((leaf, i) => {
    const input = inputs[i]!;
    assertSame(leaf.constructor, input.constructor, `leaf ${i}`);
    assertEquals(bytesOf(leaf), bytesOf(input), `leaf ${i}`);
    if (input instanceof Tensor) assertEquals((leaf as Tensor).shape, input.shape);
    assert(isPinnedHostOutput(leaf), `leaf ${i} views pinned memory`);
  });
  // One ArrayBuffer per block: the leaves are views into it.
  const buffers = new Set(back.map((leaf) => (leaf instanceof Tensor ? leaf.data : leaf).buffer));
  assert(buffers.size <= poolStats().blocksLive - before.blocksLive, `${buffers.size} buffers`);
  assert(poolStats().blocksLive > before.blocksLive, "the pinned block is held by the outputs");
  assertSame(releaseHostOutput(back), buffers.size);
  sameCounts(poolStats(), before, "after releaseHostOutput");
  disposeAll(onGpu);
});

hostTest("releaseHostOutput empties every view of the block, is idempotent, and leaves other arrays alone", () => {
  const mine = new Float32Array([1, 2]);
  const onGpu = startCopy({ a: new Float32Array([1, 2, 3]), b: new Int16Array([4, 5]) }, "cuda:0").get();
  const before = poolStats();
  const back = startCopy({ ...onGpu, mine }, "cpu").get();
  assertSame(back.mine, mine, "host leaves are reused, not pinned");
  assert(!isPinnedHostOutput(mine));
  assertEquals(back.a, new Float32Array([1, 2, 3]));
  const a = back.a as Float32Array;
  const b = back.b as Int16Array;
  const kept = b.slice(); // copy out what you keep
  assertSame(releaseHostOutput(a), 1, "one block for both leaves");
  assertSame(a.length, 0, "detached");
  assertSame(b.length, 0, "the sibling view of the same block is empty too");
  assertEquals(kept, new Int16Array([4, 5]));
  assertEquals(mine, new Float32Array([1, 2]), "a non-pinned array is untouched");
  assertSame(releaseHostOutput(back), 0, "idempotent");
  assert(!isPinnedHostOutput(back.a));
  sameCounts(poolStats(), before, "after release");
  disposeAll(onGpu);
});

hostTest("disposeAll releases pinned host outputs too", () => {
  const onGpu = startCopy(makeExampleBatch(3), "cuda:0").get();
  const before = poolStats();
  const back = startCopy(onGpu, "cpu").get();
  assertEquals(back, makeExampleBatch(3));
  assert(poolStats().blocksLive > before.blocksLive);
  assert(disposeAll(back) >= 1);
  sameCounts(poolStats(), before, "after disposeAll");
  disposeAll(onGpu);
});

hostTest("outputs dropped without release go back to the pool after garbage collection", async () => {
  const onGpu = startCopy([new Float64Array(1000).fill(2.5), new Uint8Array(300_000).fill(9)], "cuda:0").get();
  await settle();
  const before = poolStats();
  let sum = 0;
  (() => {
    for (let i = 0; i < 10; i++) {
      const back = startCopy(onGpu, "cpu").get();
      sum += (back[0] as Float64Array)[999]! + (back[1] as Uint8Array)[299_999]!;
    }
  })();
  assertSame(sum, 10 * (2.5 + 9));
  assert(poolStats().blocksLive > before.blocksLive, "held until collected");
  await collectUntil(() => poolStats().blocksLive === before.blocksLive);
  sameCounts(poolStats(), before, "after GC");
  disposeAll(onGpu);
}, NEEDS_GC);

hostTest("a view keeps its whole block alive after its siblings are collected", async () => {
  const onGpu = startCopy({ a: new Int32Array([1, 2, 3]), b: new Int32Array([4, 5, 6]) }, "cuda:0").get();
  await settle();
  const before = poolStats();
  const kept = (() => startCopy(onGpu, "cpu").get().b)(); // `a` and the container are garbage
  for (let i = 0; i < 5; i++) {
    collectGarbage();
    await tick(1);
  }
  assertEquals(kept, new Int32Array([4, 5, 6]));
  assert(poolStats().blocksLive > before.blocksLive, "the block lives while `b` does");
  assertSame(releaseHostOutput(kept), 1);
  sameCounts(poolStats(), before, "after release");
  disposeAll(onGpu);
}, NEEDS_GC);

hostTest("toHost() gives JS-owned memory and holds no pinned block", () => {
  const t = startCopy(new Tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]), "cuda:0").get();
  const before = poolStats();
  const host = t.toTensor();
  assert(!isPinnedHostOutput(host));
  assertEquals(host.shape, [2, 3]);
  assertEquals(host.data, new Float32Array([1, 2, 3, 4, 5, 6]));
  sameCounts(poolStats(), before, "after toHost");
  t.dispose();
});

hostTest("mixed sources: host leaves, cuda:0 and cuda:1 tensors to cpu, exact", () => {
  const x0 = randomLeaf("float32", [65], 1) as Float32Array;
  const x1 = randomLeaf("int64", [3, 5], 2) as Tensor;
  const host = randomLeaf("uint16", [9], 3) as Uint16Array;
  const on0 = startCopy(x0, "cuda:0").get();
  const on1 = startCopy(x1, "cuda:1").get();
  const before = poolStats();
  const h = startCopy({ on0, on1, host, n: 1 }, "cpu");
  const back = h.get();
  assertEquals(back.on0, x0);
  assertEquals((back.on1 as Tensor).data, x1.data);
  assertEquals((back.on1 as Tensor).shape, [3, 5]);
  assertSame(back.host, host);
  assertSame(back.n, 1);
  const stats = h.stats();
  assertSame(stats.leaves, 3);
  assertSame(stats.leavesReused, 1);
  assert(stats.deviceToHostPath !== "none", stats.deviceToHostPath);
  h.dispose();
  releaseHostOutput(back);
  sameCounts(poolStats(), before, "after release");
  disposeAll([on0, on1]);
}, skipWithoutDriver === undefined && cudaDeviceCount() < 2 ? "needs two devices (FAKE_CUDA_DEVICE_COUNT=2)" : undefined);

hostTest("zero-byte device leaves come back as empty arrays", () => {
  const onGpu = startCopy({ e: new Float32Array(0), t: new Tensor(new Int8Array(0), [0, 3]), x: new Uint8Array([7]) }, "cuda:0").get();
  const back = startCopy(onGpu, "cpu").get();
  assertEquals(back.e, new Float32Array(0));
  assertEquals((back.t as Tensor).shape, [0, 3]);
  assertEquals(back.x, new Uint8Array([7]));
  releaseHostOutput(back);
  disposeAll(onGpu);
});

hostTest("a pinned output can be copied back to the device, and a released one cannot be read", () => {
  const onGpu = startCopy(new Float32Array([3, 1, 4]), "cuda:0").get();
  const back = startCopy(onGpu, "cpu").get() as TypedArray;
  const again = startCopy(back, "cuda:0").get();
  assert(again instanceof DeviceTensor);
  assertEquals(again.toHost(), new Float32Array([3, 1, 4]));
  releaseHostOutput(back);
  assertSame(back.length, 0);
  // A released output's buffer is detached: copying it is an error saying it was released, not an empty copy.
  const error = assertThrows(() => startCopy({ back }, "cuda:0"), MtcError, "its pinned memory was released");
  assertSame(error.path, ".back");
  disposeAll([onGpu, again]);
  assertThrows(() => startCopy(new Tensor(back as Float32Array, [3]), "cuda:0"), MtcError);
});

hostTest("Bun: pinned buffers are freed by libmtc's release callback (Deno: a FinalizationRegistry)", () => {
  const lib = library();
  const address = lib.functionAddress("mtc_block_release_callback");
  assert(typeof address === "number" && address > 0, `the callback's address: ${address}`);
  // Detaching a buffer runs its deallocator at once: the block is back before releaseHostOutput returns.
  const onGpu = startCopy(new Float32Array([1, 2]), "cuda:0").get();
  const before = poolStats();
  const back = startCopy(onGpu, "cpu").get();
  assertSame(poolStats().blocksLive, before.blocksLive + 1);
  releaseHostOutput(back);
  assertSame(poolStats().blocksLive, before.blocksLive);
  onGpu.dispose();
}, runner === "bun" ? undefined : "Bun only: Deno frees pinned buffers through a FinalizationRegistry");
