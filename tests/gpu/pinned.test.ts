// Pinned tensors and arenas against the real driver, where the DMA reads
// pinned memory after startCopy returns: a guard that let the next batch's
// bytes in too early shows here as wrong bytes on the device.
import { Arena, copyInto, disposeAll, MtcError, pinnedArray, pinnedTensor, poolStats, startArenaCopy, startCopy, Tensor } from "../../ts/mod.ts";
import { assert, assertRejects, assertSame } from "../ts/harness.ts";
import { DEVICE, fake, gpuTest, withCopyDelay } from "./gpu_env.ts";
import { bytesOf, DTYPES, randomLeaf } from "../ts/random_tensors.ts";

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The index of the first element of `a` that is not `value`, or -1. */
function firstNot(a: Uint8Array, value: number): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== value) return i;
  return -1;
}

gpuTest("arena: a reset waits for the DMA that reads it; the next batch never reaches that copy", async () => {
  using arena = Arena.create(256 << 20);
  for (let round = 0; round < 5; round++) {
    const a = arena.array("uint8", 200 << 20); // ~4 ms of DMA
    a.fill(1 + round);
    const handle = startCopy(a, DEVICE);
    await arena.reset();
    const b = arena.array("uint8", 200 << 20);
    b.fill(200); // the same memory: a copy still reading it would take these
    using onGpu = await handle;
    const back = onGpu.toHost() as Uint8Array;
    assertSame(firstNot(back, 1 + round), -1, `round ${round}: the device copy holds the first batch only`);
    await arena.reset();
  }
});

gpuTest("a pinned tensor disposed while its DMA runs: the copy reads its bytes, not the next owner's", async () => {
  for (let round = 0; round < 5; round++) {
    const t = pinnedTensor("uint8", [64 << 20]);
    (t.data as Uint8Array).fill(7);
    const handle = startCopy(t, DEVICE);
    t.dispose();
    const next = pinnedArray("uint8", 64 << 20); // the pool hands the block out again only once the copy is over
    next.fill(9);
    using onGpu = await handle;
    assertSame(firstNot(onGpu.toTensor().data as Uint8Array, 7), -1, `round ${round}`);
    disposeAll(next);
  }
});

gpuTest("mixed pinned and pageable leaves of every dtype at odd sizes and alignments: exact; whole-arena twins too", async () => {
  using arena = Arena.create(8 << 20);
  const batch: Record<string, unknown> = {};
  const sources: Record<string, Uint8Array> = {};
  DTYPES.forEach((dtype, k) => {
    for (const n of [1, 3, 257, 4099]) {
      const source = randomLeaf(dtype, [n], k * 10 + n);
      const key = `${dtype}_${n}`;
      sources[key] = bytesOf(source).slice();
      if ((k + n) % 3 === 0) batch[key] = source;
      else {
        if ((k + n) % 2 === 0) arena.array("uint8", 1 + (n % 13)); // a gap
        const t = arena.tensor(dtype, [n]);
        bytesOf(t.data).set(bytesOf(source));
        batch[key] = t;
      }
    }
  });
  const handle = startCopy(batch, DEVICE);
  const onGpu = await handle;
  assert(handle.stats().leavesDirect > 0 && handle.stats().bytesStaged > 0, "both kinds");
  for (const key of Object.keys(batch)) {
    const back = (onGpu as Record<string, { toTensor(): Tensor }>)[key]!.toTensor();
    assert(sameBytes(bytesOf(back.data), sources[key]!), key);
  }
  disposeAll(onGpu);
  using whole = await startArenaCopy(arena, DEVICE);
  for (const key of Object.keys(batch)) {
    const leaf = batch[key];
    if (!(leaf instanceof Tensor) || arena.offsetOf(leaf.data) === undefined) continue;
    using twin = arena.twin(whole, leaf);
    assert(sameBytes(bytesOf(twin.toTensor().data), sources[key]!), `twin ${key}`);
  }
});

gpuTest("pinned memory held by tensors and arenas comes back", () => {
  const before = poolStats().pinnedHeldBytes;
  const arena = Arena.create(1 << 20);
  const t = pinnedTensor("float32", [1000]);
  assert(poolStats().pinnedHeldBytes > before);
  arena.dispose();
  t.dispose();
  assertSame(poolStats().pinnedHeldBytes, before);
});

gpuTest("copyInto from the GPU into arena destinations: the GPU writes them in place, exact for every dtype; mixed too", async () => {
  const batch: Record<string, Tensor> = {};
  DTYPES.forEach((dtype, k) => {
    for (const n of [1, 5, 333, 70_000]) batch[`${dtype}_${n}`] = randomLeaf(dtype, [n, 1], k * 7 + n) as Tensor;
  });
  const onGpu = await startCopy(batch, DEVICE);
  using arena = Arena.create(32 << 20);
  for (let round = 0; round < 3; round++) {
    const dest = arena.consolidate(batch);
    for (const key of Object.keys(dest)) bytesOf(dest[key]!.data).fill(0);
    const handle = copyInto(onGpu, dest);
    await handle;
    assert(handle.stats().leavesDirect === Object.keys(batch).length && handle.stats().bytesStaged === 0, JSON.stringify(handle.stats()));
    for (const key of Object.keys(batch)) assert(sameBytes(bytesOf(dest[key]!.data), bytesOf(batch[key]!.data)), `round ${round}: ${key}`);
    await arena.reset();
  }
  const mixed: Record<string, Tensor> = {};
  Object.keys(batch).forEach((key, k) => {
    const leaf = batch[key]!;
    mixed[key] = k % 3 === 0 ? arena.tensor(leaf.dtype, leaf.shape) : randomLeaf(leaf.dtype, leaf.shape, 5) as Tensor;
  });
  await copyInto(onGpu, mixed);
  for (const key of Object.keys(batch)) assert(sameBytes(bytesOf(mixed[key]!.data), bytesOf(batch[key]!.data)), `mixed ${key}`);
  disposeAll(onGpu);
});

gpuTest("a pinned destination disposed while the GPU writes it: the block is not handed out again until the copy is over", async () => {
  const big = new Uint8Array(64 << 20).fill(5);
  using onGpu = await startCopy(big, DEVICE);
  for (let round = 0; round < 5; round++) {
    const dest = pinnedTensor("uint8", [64 << 20]);
    const handle = copyInto(onGpu, dest.data); // one DMA of 64 MiB into the pinned block, in place
    dest.dispose();
    const next = pinnedArray("uint8", 64 << 20); // must not be the block the DMA still writes
    next.fill(9);
    // The destination was released in flight: an MtcError saying so, nothing written to it.
    const e = await assertRejects(() => handle, MtcError, "while the copy was in flight; no destination of this copy was written");
    assertSame(e.code, "MTC_ERR_INVALID_STATE", e.message);
    assertSame(firstNot(next, 9), -1, `round ${round}: the GPU's bytes never reached the next owner`);
    handle.dispose();
    disposeAll(next);
  }
});

gpuTest("two GPUs: copies into one pinned destination from two devices land in submission order", async () => {
  // On a GPU a DMA that does not wait for the earlier one leaves its bytes
  // or the earlier ones, as the timing goes. The emulated driver copies at
  // once, so there the first copy takes a modelled 300 ms and the driver's
  // race check fails a DMA into the destination that no event orders after
  // it: the second copy's, every time, without the wait.
  const big = fake === null ? 128 << 20 : 1 << 20;
  const fromOne = await startCopy(new Uint8Array(big).fill(1), "cuda:1");
  const fromZero = await startCopy(new Uint8Array(big).fill(2), "cuda:0");
  using dest = pinnedTensor("uint8", [big]);
  const races = fake?.raceCount() ?? 0;
  fake?.checkRaces(true);
  try {
    for (let round = 0; round < 3; round++) {
      const copyFirst = () => [copyInto(fromOne, dest.data, { useBackgroundThread: fake === null })] as const;
      const [first] = await withCopyDelay(300_000, copyFirst); // from cuda:1, in place
      const second = copyInto(fromZero, dest.data); // from cuda:0, after the first on the GPU
      await first;
      await second;
      assertSame(firstNot(dest.data as Uint8Array, 2), -1, `round ${round}: the later copy's bytes, everywhere`);
    }
  } finally {
    fake?.checkRaces(false);
  }
  if (fake !== null) assertSame(fake.raceCount(), races, "no DMA raced another");
  disposeAll([fromOne, fromZero]);
}, { gpus: 2 });
