// Prepared copies on the GPU: the example batch (pageable and in an arena)
// and every dtype through prepareCopy give the plain copy's bytes, back to
// the host through a prepared copy too; prepareCopyInto writes fixed
// DeviceTensors step after step; a result disposed per block gives its
// device memory back.
import { Arena, copyInto, disposeAll, poolStats, prepareCopy, prepareCopyInto, startCopy } from "../../ts/mod.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { assert, assertEquals, assertSame } from "../ts/harness.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";
import { bytesOf, DTYPES, randomLeaf } from "../ts/random_tensors.ts";
import { checkBatch } from "../ts/fixtures/checks.ts";

gpuTest("prepared startCopy of the example batch, pageable and from an arena: the plain copy's bytes, every run", async () => {
  using arena = Arena.create(1 << 20);
  const sample = makeExampleBatch(1);
  using prepared = prepareCopy(sample, DEVICE);
  const inArena = arena.consolidate(makeExampleBatch(2));
  using fromArena = prepareCopy(inArena, DEVICE);
  for (let seed = 3; seed < 8; seed++) {
    const batch = makeExampleBatch(seed);
    const got = await prepared.start(batch);
    using back = prepareCopy(got, "cpu");
    const host = await back.start(got);
    checkBatch(host, batch, null, `seed ${seed}`);
    back.disposeResult(host);
    prepared.disposeResult(got);
    const fromPinned = await fromArena.start(inArena);
    checkBatch(await startCopy(fromPinned, "cpu", { usePinnedStaging: false }), inArena, null, `arena ${seed}`);
    fromArena.disposeResult(fromPinned);
  }
});

gpuTest("prepared startCopy, every dtype, packed and own leaves: exact", async () => {
  const make = (seed: number) => DTYPES.flatMap((dtype, i) => [randomLeaf(dtype, [17, 9], seed + i), randomLeaf(dtype, [70_000], seed + 100 + i)]);
  using prepared = prepareCopy(make(1), DEVICE);
  for (const seed of [1000, 2000]) {
    const inputs = make(seed);
    const got = await prepared.start(inputs);
    const back = await startCopy(got, "cpu", { usePinnedStaging: false });
    back.forEach((host, i) => assertEquals(bytesOf(host), bytesOf(inputs[i]!), `leaf ${i}`));
    prepared.disposeResult(got);
  }
});

gpuTest("prepared copyInto: fixed DeviceTensors written step after step, as copyInto writes them; disposeResult gives the memory back", async () => {
  const buffers = await startCopy(makeExampleBatch(1), DEVICE);
  const plain = await startCopy(makeExampleBatch(1), DEVICE);
  using step = prepareCopyInto(makeExampleBatch(2), buffers);
  for (let seed = 3; seed < 6; seed++) {
    const source = makeExampleBatch(seed);
    assertSame(await step.start(source), buffers);
    await copyInto(source, plain);
    checkBatch(await startCopy(buffers, "cpu", { usePinnedStaging: false }), source, null, `step ${seed}`);
  }
  disposeAll([buffers, plain]);
  const before = poolStats().deviceBytesLive;
  using prepared = prepareCopy(makeExampleBatch(1), DEVICE);
  const got = await prepared.start(makeExampleBatch(9));
  assert(poolStats().deviceBytesLive > before, "the result holds device memory");
  prepared.disposeResult(got);
  assertSame(poolStats().deviceBytesLive, before, "disposeResult gave it back");
});
