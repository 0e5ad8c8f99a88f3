// startLoader on the real GPU: four workers make patterned batches
// (tests/ts/fixtures/loader_batches.ts) and copy them to the device; the
// main thread takes them in order and reads every byte back. Then a loop
// left while the workers copy: what was in flight comes back
// (tests/ts/loader.test.ts has the rest).
import { disposeAll, startLoader } from "../../ts/mod.ts";
import { counters, noneAbove, toHost, until } from "../ts/fixtures/threads.ts";
import { assert, assertSame } from "../ts/harness.ts";
import { checkBatch } from "../ts/fixtures/checks.ts";
import { type PatternedBatch, patternedBatch } from "../ts/fixtures/loader_batches.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";

const PRODUCERS = new URL("../ts/fixtures/loader_batches.ts", import.meta.url);




gpuTest("loader: four workers, 200 batches to the GPU, taken in index order, every byte read back", async () => {
  const before = counters();
  await using loader = startLoader<PatternedBatch & { worker: number }>({ module: PRODUCERS, export: "ordered", device: DEVICE, workers: 4, batches: 200 });
  let index = 0;
  for await (const batch of loader) {
    assertSame(batch.index, index);
    assertSame(batch.worker, index % 4);
    checkBatch(toHost(batch), patternedBatch(index), null, `batch ${index}`);
    disposeAll(batch);
    index++;
  }
  assertSame(index, 200);
  await loader.close();
  await until(() => noneAbove(before));
  assert(noneAbove(before), `blocks, plans and parcels back: ${JSON.stringify(counters())} against ${JSON.stringify(before)}`);
});

gpuTest("loader: a loop left while four workers copy; what they had in flight comes back", async () => {
  for (let round = 0; round < 3; round++) {
    const before = counters();
    const loader = startLoader<PatternedBatch>({ module: PRODUCERS, export: "ordered", device: DEVICE, workers: 4, depth: 3 });
    for await (const batch of loader) {
      disposeAll(batch);
      if (batch.index === 10 + round) break;
    }
    await until(() => noneAbove(before));
    assert(noneAbove(before), `round ${round}: blocks, plans and parcels back: ${JSON.stringify(counters())} against ${JSON.stringify(before)}`);
  }
});
