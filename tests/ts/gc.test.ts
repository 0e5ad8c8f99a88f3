// Garbage collection against copies in flight and dropped outputs, through the
// emulated driver with a copy delay (so copies really are in flight):
// - inputs reachable only through their handle survive forced collections,
//   and every byte arrives; once the handle is done they become collectable;
// - DeviceTensors and pinned host outputs dropped without dispose() are
//   reclaimed by the FinalizationRegistry backstops: the pool counters come
//   back to their baseline.
// Needs a way to force collection: Bun.gc, or Deno's gc() (--v8-flags=--expose-gc).
import { type AsyncCopyHandle, type CopyOptions, DeviceTensor, disposeAll, startCopy, Tensor, type TypedArray } from "../../ts/mod.ts";
import { canCollectGarbage, collectGarbage, fakeDriver, skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, note, runner, test } from "./harness.ts";
import { assertPoolsBack, checkBytes, collectUntil, poolDrift, poolMark, Tally } from "./fixtures/checks.ts";

const tally = new Tally("gc");
const skip = skipWithoutDriver ??
  (!canCollectGarbage() ? "cannot force garbage collection (Deno: run with --v8-flags=--expose-gc, as `npm run test:one` does)" : undefined) ??
  (fakeDriver() === null ? "needs libfakecuda's hooks (copy delay)" : undefined);
if (skip !== undefined) note(`gc tests skipped: ${skip}`);

const HANDLES = 8;
const LEAVES = 400;
const KINDS = [Uint8Array, Int16Array, Float32Array, BigInt64Array, Float64Array] as const;

/** Leaf i of batch b: a small array (1..64 bytes) of a kind chosen by i, with bytes that depend on (b, i). */
function leafOf(b: number, i: number): TypedArray | Tensor {
  const Kind = KINDS[i % KINDS.length]!;
  const length = 1 + ((i * 7 + b) % (64 / Kind.BYTES_PER_ELEMENT));
  const data = new Kind(length);
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  for (let j = 0; j < bytes.length; j++) bytes[j] = (b * 71 + i * 13 + j * 3 + 1) & 255;
  return i % 10 === 9 ? new Tensor(data, [length, 1]) : data;
}

function batchOf(b: number): { id: number; leaves: (TypedArray | Tensor)[] } {
  return { id: b, leaves: Array.from({ length: LEAVES }, (_, i) => leafOf(b, i)) };
}

/** Fresh small arrays that take the place of anything collected (and would overwrite it). */
function churn(): number {
  let sum = 0;
  for (let i = 0; i < 20_000; i++) {
    const a = new Uint8Array(1 + (i % 48));
    a.fill(0xee);
    sum += a.length;
  }
  return sum;
}

function gcTest(name: string, fn: () => Promise<void>): void {
  test(`gc: ${name}`, async () => {
    for (let i = 0; i < 3; i++) { // what earlier tests dropped goes first
      collectGarbage();
      await tick(1);
    }
    const mark = poolMark();
    await fn();
    // Whatever a test dropped must be reclaimed before the next one measures.
    const rounds = await collectUntil(() => poolDrift(mark) === "");
    assert(rounds >= 0, `${name}: not reclaimed (${poolDrift(mark)})`);
  }, { skip, timeout: 60_000 });
}

gcTest("warm-up: 300 copies to cuda:0 and back", async () => {
  for (let i = 0; i < 300; i++) {
    const input = batchOf(i % 4);
    const onGpu = await startCopy(input, i % 2 === 0 ? "cuda:0" : "cuda:1");
    const back = startCopy(onGpu, "cpu").get();
    if (i % 50 === 0) for (let j = 0; j < LEAVES; j++) checkBytes(back.leaves[j]! as TypedArray | Tensor, input.leaves[j]!, tally, `warm-up ${i}`);
    disposeAll([onGpu, back]);
    tally.copies += 2;
  }
});

// With the delay of each copy (µs), so that each batch takes ~200 ms and the
// last on each device is still in flight after a slow collection (V8's full
// gc() took 50-400 ms on the loaded 2-core CI machine). Unpacked, each leaf
// is a copy of its own.
const OPTION_SETS: [string, CopyOptions | undefined, number][] = [
  ["defaults", undefined, 200_000],
  ["no pinned staging", { usePinnedStaging: false }, 200_000],
  ["no background thread", { useBackgroundThread: false }, 200_000],
  ["unpacked", { packCpuTensors: false }, 500],
];

for (const [label, options, delayUs] of OPTION_SETS) {
  gcTest(`inputs held only by in-flight handles survive collection, every byte arrives (${label})`, async () => {
    const started = (() => {
      const handles: AsyncCopyHandle<ReturnType<typeof batchOf>>[] = [];
      const refs: WeakRef<object>[] = [];
      for (let b = 0; b < HANDLES; b++) {
        const batch = batchOf(b);
        refs.push(new WeakRef(batch.leaves[0]!), new WeakRef(batch.leaves[LEAVES - 1]!));
        handles.push(startCopy(batch, b % 2 === 0 ? "cuda:0" : "cuda:1", options) as unknown as AsyncCopyHandle<ReturnType<typeof batchOf>>);
      }
      return { handles, refs };
    });
    const { handles, refs, inFlight } = await withCopyDelay(delayUs, async () => {
      const { handles, refs } = started();
      let inFlight = 0;
      for (let round = 0; round < 4; round++) {
        churn();
        if (round === 0) inFlight = handles.filter((h) => !h.ready()).length; // in flight when collection starts
        collectGarbage();
        await tick(1);
      }
      return { handles, refs, inFlight };
    });
    assert(inFlight > 0, "at least one copy was in flight when the first collection started");
    assert(refs.every((r) => r.deref() !== undefined), "a handle keeps its inputs alive until done");
    const outputs = await Promise.all(handles);
    for (let b = 0; b < HANDLES; b++) {
      const onGpu = outputs[b]!;
      assert(onGpu.id === b && onGpu.leaves[0] instanceof DeviceTensor);
      const back = startCopy(onGpu, "cpu").get();
      for (let i = 0; i < LEAVES; i++) checkBytes(back.leaves[i]! as TypedArray | Tensor, leafOf(b, i), tally, `[${b}].leaves[${i}]`);
      disposeAll([onGpu, back]);
      handles[b]!.dispose();
    }
    tally.copies += 2 * HANDLES;
    tally.cases++;
    note(`gc (${runner}, ${label}): ${inFlight} of ${HANDLES} copies in flight when the first collection started`);
    // Done and disposed: the handles no longer hold the inputs.
    handles.length = 0;
    outputs.length = 0;
    const rounds = await collectUntil(() => refs.every((r) => r.deref() === undefined));
    assert(rounds >= 0, `inputs still reachable after their copies were disposed: ${refs.filter((r) => r.deref() !== undefined).length}`);
  });
}

gcTest("DeviceTensor sources held only by an in-flight copy to cpu survive collection", async () => {
  const handles = await withCopyDelay(15_000, async () => {
    const handles = (() => {
      const list: AsyncCopyHandle<ReturnType<typeof batchOf>>[] = [];
      for (let b = 0; b < 4; b++) {
        const onGpu = startCopy(batchOf(b), "cuda:0").get(); // dropped below without dispose()
        list.push(startCopy(onGpu, "cpu") as unknown as AsyncCopyHandle<ReturnType<typeof batchOf>>);
      }
      return list;
    })();
    assert(handles.some((h) => !h.ready()), "a copy to cpu is in flight");
    for (let round = 0; round < 4; round++) {
      churn();
      collectGarbage();
      await tick(1);
    }
    return handles;
  });
  for (let b = 0; b < handles.length; b++) {
    const back = await handles[b]!;
    for (let i = 0; i < LEAVES; i++) checkBytes(back.leaves[i]! as TypedArray | Tensor, leafOf(b, i), tally, `[${b}].leaves[${i}]`);
    disposeAll(back);
    handles[b]!.dispose();
  }
  tally.copies += 8;
  tally.cases++;
});

/** Forces collection until the counters are back at `mark`; fails naming what was not reclaimed. */
async function expectReclaimed(mark: ReturnType<typeof poolMark>, what: string): Promise<void> {
  const rounds = await collectUntil(() => poolDrift(mark) === "");
  assert(rounds >= 0, `${what}: not reclaimed after 200 collections (${poolDrift(mark)})`);
  assertPoolsBack(mark, what);
  note(`gc (${runner}): ${what}: reclaimed after ${rounds + 1} collection round(s)`);
  tally.cases++;
}

gcTest("DeviceTensors dropped without dispose() are reclaimed: device bytes and blocks back to baseline", async () => {
  const mark = poolMark();
  const live = await (async () => {
    const outputs: unknown[] = []; // referenced by nothing once this function returns
    for (let b = 0; b < 50; b++) {
      const h = startCopy({ batch: batchOf(b), big: new Float32Array(100_000) }, b % 2 === 0 ? "cuda:0" : "cuda:1");
      outputs.push(await h);
      h.dispose(); // the handle goes; its outputs stay
    }
    return poolMark();
  })();
  assert(live.blocksLive >= mark.blocksLive + 100 && live.deviceBytesLive > mark.deviceBytesLive, "outputs were alive");
  tally.copies += 50;
  await expectReclaimed(mark, "50 dropped device outputs (100 blocks)");
});

gcTest("handles and outputs both dropped, nothing disposed, are reclaimed", async () => {
  const mark = poolMark();
  await withCopyDelay(2_000, async () => {
    (() => {
      for (let b = 0; b < 20; b++) startCopy(batchOf(b), "cuda:0");
    })();
    const gotten = (() => {
      const list: unknown[] = [];
      for (let b = 0; b < 20; b++) list.push(startCopy(batchOf(b), "cuda:1").get());
      return list.length;
    })();
    assert(gotten === 20);
  });
  tally.copies += 40;
  await expectReclaimed(mark, "20 dropped handles and 20 dropped results");
});

gcTest("pinned host outputs dropped without release are reclaimed: pinned bytes in use back to baseline", async () => {
  const sources = Array.from({ length: 8 }, (_, b) => startCopy(batchOf(b), "cuda:0").get());
  const mark = poolMark();
  const during = await (async () => {
    const outputs: unknown[] = []; // referenced by nothing once this function returns
    for (let round = 0; round < 5; round++) {
      for (let b = 0; b < sources.length; b++) {
        const h = startCopy(sources[b]!, "cpu");
        const back = await h;
        outputs.push(back);
        h.dispose();
        if (round === 0) for (let i = 0; i < LEAVES; i += 37) checkBytes(back.leaves[i]! as TypedArray | Tensor, leafOf(b, i), tally, "pinned output");
        // `back` views pinned memory; it is dropped without releaseHostOutput.
      }
    }
    return poolMark();
  })();
  assert(during.pinnedBytesInUse > mark.pinnedBytesInUse || during.hostBytesLive > mark.hostBytesLive, "pinned outputs were alive");
  tally.copies += 40;
  await expectReclaimed(mark, "40 dropped pinned host outputs");
  disposeAll(sources);
});

gcTest("a dropped handle whose copy is in flight is released later, without stalling the event loop", async () => {
  startCopy(new Uint8Array(1), "cuda:0").get().dispose(); // the driver reads its environment (delay 0) on first use
  const mark = poolMark();
  // A finalizer that waited would stall a round for most of this; a forced
  // collection alone took up to ~1.8 s on the loaded 2-core CI machine.
  const delayMs = 4_000;
  const stall = 2_500;
  await withCopyDelay(delayMs * 1000, async () => {
    const ref = (() => new WeakRef(startCopy({ a: batchOf(1) }, "cuda:0")))();
    await tick(1);
    assert(poolMark().plansLive === mark.plansLive + 1);
    let longest = 0;
    let collected = -1;
    const t0 = performance.now();
    for (let round = 0; round < collected + 5 || collected < 0; round++) {
      if (performance.now() - t0 > stall) break;
      const t = performance.now();
      collectGarbage();
      await tick(1); // finalization callbacks run here
      longest = Math.max(longest, performance.now() - t);
      await tick(0); // deref() below keeps its target alive until the end of this job: collect in the next
      if (collected < 0 && ref.deref() === undefined) collected = round;
    }
    assert(collected >= 0, "the handle was collected");
    assert(longest < stall, `a collection round took ${longest.toFixed(0)} ms: the finalizer waited for the copy`);
    if (performance.now() - t0 < delayMs - 500) {
      assert(poolMark().plansLive === mark.plansLive + 1, "the plan is released only once its copy is over");
    }
    note(`gc (${runner}): a dropped in-flight handle was collected in round ${collected + 1}; longest round ${longest.toFixed(0)} ms`);
    // The retry timer releases the plan once the copy is over (~delayMs after it started).
    while (poolMark().plansLive > mark.plansLive && performance.now() - t0 < delayMs * 4) await tick(20);
    await expectReclaimed(mark, "a dropped in-flight handle");
  });
  tally.copies++;
});

test("gc: totals: every case ran, every copy checked", () => tally.check(runner, { cases: 9, copies: 803, bytes: 577_348 }), { skip });
