// startLoader on the real GPU: four workers make patterned batches
// (tests/ts/fixtures/loader_batches.ts) and copy them to the device; the
// main thread takes them in order and reads every byte back. Then a loop
// left while the workers copy: what was in flight comes back
// (tests/ts/loader.test.ts has the rest).
import { disposeAll, startLoader } from "../../ts/mod.ts";
import { expectCountersBack, settledCounters, toHost } from "../ts/fixtures/threads.ts";
import { assert, assertSame } from "../ts/harness.ts";
import { checkBatch } from "../ts/fixtures/checks.ts";
import { type PatternedBatch, patternedBatch } from "../ts/fixtures/loader_batches.ts";
import { expectedBatch } from "../ts/fixtures/loader_parcels.ts";
import { disposeGroupOf } from "../../ts/thread/parcel_take.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";
import { runScript } from "../ts/fixtures/spawn.ts";

const PRODUCERS = new URL("../ts/fixtures/loader_batches.ts", import.meta.url);
const PARCEL_PRODUCERS = new URL("../ts/fixtures/loader_parcels.ts", import.meta.url);




gpuTest("loader: four workers, 200 batches to the GPU, taken in index order, every byte read back", async () => {
  const before = await settledCounters();
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
  await expectCountersBack(before, "blocks, plans and parcels back");
});

gpuTest("loader: four workers, 200 arena batches of one layout as parcels, taken in order, every byte read back, disposed per block", async () => {
  const before = await settledCounters();
  await using loader = startLoader<Record<string, unknown>>({ module: PARCEL_PRODUCERS, export: "arenaBatch", device: DEVICE, workers: 4, batches: 200 });
  let index = 0;
  for await (const batch of loader) {
    assertSame(batch.index, index);
    checkBatch(toHost(batch), expectedBatch(index, false), null, `batch ${index}`);
    assert(disposeGroupOf(batch), `batch ${index} came as a parcel of a prepared layout`);
    index++;
  }
  assertSame(index, 200);
  const stats = loader.stats;
  assertSame(stats.taken, 200);
  assert(stats.workers.every((w) => w.made === 50), "each worker made its share");
  await loader.close();
  await expectCountersBack(before, "blocks, plans and parcels back");
});

gpuTest("loader: a loop left while four workers copy; what they had in flight comes back", async () => {
  for (let round = 0; round < 3; round++) {
    const before = await settledCounters();
    const loader = startLoader<PatternedBatch>({ module: PRODUCERS, export: "ordered", device: DEVICE, workers: 4, depth: 3 });
    for await (const batch of loader) {
      disposeAll(batch);
      if (batch.index === 10 + round) break;
    }
    await expectCountersBack(before, `round ${round}: blocks, plans and parcels back`);
  }
});

gpuTest("loader: an abort while the consumer waits rejects with the signal's reason; what was in flight comes back", async () => {
  const before = await settledCounters();
  const controller = new AbortController();
  // Batch 3 never comes (its producer sleeps); the other worker's copies go on.
  const loader = startLoader<PatternedBatch>({ module: PRODUCERS, export: "slow", device: DEVICE, workers: 2, depth: 2, signal: controller.signal, args: { ms: 60_000, only: 3 } });
  for (let i = 0; i < 3; i++) {
    const { value } = await loader.next();
    assertSame(value!.index, i);
    disposeAll(value);
  }
  const waiting = loader.next();
  const reason = new Error("stop loading");
  setTimeout(() => controller.abort(reason), 10);
  let caught: unknown;
  try {
    await waiting;
  } catch (e) {
    caught = e;
  }
  assertSame(caught, reason, "the signal's reason");
  assertSame((await loader.next()).done, true, "done after the abort");
  await loader.close();
  await expectCountersBack(before, "aborted");
});

const EXIT_FIXTURE = new URL("../ts/fixtures/loader_exit.ts", import.meta.url).pathname;
for (const mode of ["exit", "end"]) {
  gpuTest(`loader: a child process that ${mode === "exit" ? "exits with the loader open" : "leaves its loop and ends"} while four workers copy to the GPU exits cleanly`, async () => {
    const r = await runScript(EXIT_FIXTURE, [mode], {});
    const shown = `code ${r.code}, signal ${r.signal}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
    assert(r.stdout.includes(`took batch 0 (${mode})`), `the child took its first batch: ${shown}`);
    assertSame(r.signal, null, `no signal: ${shown}`);
    assertSame(r.code, 0, `exit code 0: ${shown}`);
    assertSame(r.stderr, "", `nothing on stderr: ${shown}`);
  });
}
