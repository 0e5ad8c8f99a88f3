// prefetch: order, bounded copies in flight, overlap with the consumer, and
// cleanup on early exit, through the emulated driver.
import {
  DeviceTensor,
  disposeAll,
  MtcError,
  poolStats,
  type PoolStats,
  prefetch,
  startCopy,
  Stream,
  Tensor,
} from "../../ts/mod.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, test } from "./harness.ts";

const prefetchTest = (name: string, fn: () => void | Promise<void>) =>
  test(`prefetch: ${name}`, fn, { skip: skipWithoutDriver });

interface Batch {
  id: Float64Array;
  data: Tensor;
  label: string;
}

function makeBatch(i: number): Batch {
  const data = new Float32Array(12);
  for (let k = 0; k < data.length; k++) data[k] = i * 100 + k;
  return { id: new Float64Array([i]), data: new Tensor(data, [3, 4]), label: `b${i}` };
}

/** A sync source that counts how many batches were pulled and whether it was closed. */
function countingSource(count: number) {
  const state = { pulled: 0, closed: false };
  function* gen(): Generator<Batch> {
    try {
      for (let i = 0; i < count; i++) {
        state.pulled++;
        yield makeBatch(i);
      }
    } finally {
      state.closed = true;
    }
  }
  return { state, batches: gen() };
}

function sameLive(after: PoolStats, before: PoolStats, what: string): void {
  assertSame(after.plansLive, before.plansLive, `${what}: plansLive`);
  assertSame(after.blocksLive, before.blocksLive, `${what}: blocksLive`);
  assertSame(after.deviceBytesLive, before.deviceBytesLive, `${what}: deviceBytesLive`);
}

prefetchTest("yields every batch in order, on the device, values exact", async () => {
  const before = poolStats();
  let i = 0;
  for await (const batch of prefetch(Array.from({ length: 7 }, (_, k) => makeBatch(k)), "cuda:0")) {
    assert(batch.id instanceof DeviceTensor && batch.data instanceof DeviceTensor);
    assertSame(batch.data.device, "cuda:0");
    assertEquals(batch.id.toHost(), new Float64Array([i]));
    assertEquals(batch.data.toTensor().data, makeBatch(i).data.data);
    assertEquals(batch.data.shape, [3, 4]);
    assertSame(batch.label, `b${i}`);
    disposeAll(batch);
    i++;
  }
  assertSame(i, 7);
  sameLive(poolStats(), before, "after the loop");
});

prefetchTest("at most `depth` copies in flight, and the source is read only that far ahead", async () => {
  for (const depth of [1, 2, 4]) {
    const base = poolStats().plansLive;
    const { state, batches } = countingSource(10);
    let consumed = 0;
    let maxPlans = 0;
    for await (const batch of prefetch(batches, "cuda:1", { depth })) {
      consumed++;
      const plans = poolStats().plansLive - base;
      maxPlans = Math.max(maxPlans, plans);
      assert(plans <= depth, `depth ${depth}: ${plans} copies in flight`);
      assert(state.pulled <= consumed + depth, `depth ${depth}: pulled ${state.pulled} after handing out ${consumed}`);
      disposeAll(batch);
    }
    assertSame(consumed, 10);
    assertSame(maxPlans, depth, `depth ${depth}: the queue was full while the consumer worked`);
    assert(state.closed);
  }
});

prefetchTest("copying the next batches overlaps the consumer's work", async () => {
  const copyMs = 30;
  const workMs = 30;
  const n = 6;
  // The time the loop waits for each batch after the first: the next copy
  // runs during the consumer's work, so the wait is near 0; without overlap
  // it would be the whole copy. Judging waits rather than the total keeps
  // timer lateness out of it: a late timer lengthens the work, not the wait.
  const waits = await withCopyDelay(copyMs * 1000, async () => {
    const waited: number[] = [];
    let asked = performance.now();
    for await (const batch of prefetch(Array.from({ length: n }, (_, k) => makeBatch(k)), "cuda:0", { depth: 2 })) {
      waited.push(performance.now() - asked);
      await tick(workMs); // the consumer's work on this batch
      disposeAll(batch);
      asked = performance.now();
    }
    return waited.slice(1);
  });
  const total = waits.reduce((a, b) => a + b, 0);
  const serial = (n - 1) * copyMs;
  assert(total < serial * 0.5, `waited ${waits.map((w) => w.toFixed(1)).join(", ")} ms for batches 2..${n}; without overlap ${serial} ms in all`);
});

prefetchTest("an early break releases everything not handed out and closes the source", async () => {
  const before = poolStats();
  const { state, batches } = countingSource(20);
  let seen = 0;
  for await (const batch of prefetch(batches, "cuda:0", { depth: 3 })) {
    disposeAll(batch);
    if (++seen === 3) break;
  }
  assert(state.closed, "the source generator was closed");
  assert(state.pulled <= 6, `pulled ${state.pulled}`);
  sameLive(poolStats(), before, "after break");
});

prefetchTest("a throw in the loop body and an explicit return() clean up too", async () => {
  const before = poolStats();
  const { state, batches } = countingSource(20);
  await assertRejects(async () => {
    for await (const batch of prefetch(batches, "cuda:0")) {
      disposeAll(batch);
      throw new Error("consumer failed");
    }
  }, Error, "consumer failed");
  assert(state.closed);
  sameLive(poolStats(), before, "after a throw");

  const gen = prefetch(Array.from({ length: 5 }, (_, k) => makeBatch(k)), "cuda:0", { depth: 4 });
  const first = await gen.next();
  assert(!first.done);
  disposeAll(first.value);
  assertSame(poolStats().plansLive - before.plansLive, 4, "four copies queued");
  await gen.return(undefined);
  sameLive(poolStats(), before, "after return()");
});

prefetchTest("async sources, and large batches", async () => {
  async function* source(): AsyncGenerator<ReturnType<typeof makeExampleBatch>> {
    for (let i = 0; i < 4; i++) {
      await tick(1);
      yield makeExampleBatch(i);
    }
  }
  let i = 0;
  for await (const batch of prefetch(source(), "cuda:1", { depth: 2, packThresholdBytes: 1024 })) {
    const back = await startCopy(batch, "cpu");
    assertEquals(back, makeExampleBatch(i++));
    disposeAll([batch, back]);
  }
  assertSame(i, 4);
});

prefetchTest("a failing copy rejects the loop and releases the rest", async () => {
  const before = poolStats();
  const dead = startCopy(new Float32Array(1), "cuda:0").get();
  dead.dispose();
  const batches = [makeBatch(0), { x: dead }, makeBatch(2), makeBatch(3)] as unknown[];
  let got = 0;
  await assertRejects(async () => {
    for await (const batch of prefetch(batches, "cuda:0")) {
      got++;
      disposeAll(batch);
    }
  }, MtcError, "this DeviceTensor was disposed");
  assertSame(got, 1, "the batch before the bad one is handed out first");
  sameLive(poolStats(), before, "after the failure");
});

prefetchTest("bad options fail on the first next(); a stream option orders every copy", async () => {
  await assertRejects(() => prefetch([makeBatch(0)], "cuda:0", { depth: 0 }).next(), MtcError, "depth");
  await assertRejects(() => prefetch([makeBatch(0)], "cuda:0", { bogus: 1 } as never).next(), MtcError, "unknown option");
  using stream = Stream.create("cuda:0");
  // Copies on one stream run one after the other: copy 1 ends 200 ms after
  // copy 0, far more than a loaded machine's timer lateness.
  await withCopyDelay(200_000, async () => {
    const gen = prefetch([makeBatch(0), makeBatch(1)], "cuda:0", { stream, depth: 2 });
    const first = await gen.next(); // copy 0 is done; copy 1 is in flight
    using after = stream.recordEvent();
    assertSame(after.query(), false, "the stream waits for the copy in flight");
    assert(!first.done);
    disposeAll(first.value);
    const second = await gen.next();
    assert(!second.done);
    disposeAll(second.value);
    assert((await gen.next()).done);
  });
});
