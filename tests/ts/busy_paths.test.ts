// Busy marks on every path: a copy that reads or writes an arena (pinned
// memory of the library's) marks it busy until the copy is over, whatever
// the leaf's layout and the copy's direction, with the background thread on
// and off; reset() waits for that, so the next batch never reaches the copy.
// The table of paths is in docs/RELIABILITY.md ("Busy marks on every path").
// Emulated driver: FAKE_CUDA_COPY_DELAY_US keeps copies in flight.
import { Arena, type AsyncCopyHandle, copyInto, disposeAll, prefetch, startArenaCopy, startCopy, Tensor, ToDevice } from "../../ts/mod.ts";
import { skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, test } from "./harness.ts";

const busyTest = (name: string, fn: () => void | Promise<void>) => test(`busy: ${name}`, fn, { skip: skipWithoutDriver });

const SLOW_US = 150_000; // each emulated copy: long past the checks below
const ROWS = 8, COLS = 8;

/** The values of batch `seed`: seed * 1000 + i. */
function values(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => seed * 1000 + i);
}

/** One batch in the arena: a dense array and an 8x8 tensor, with a strided view of every other column. */
function fillBatch(arena: Arena, seed: number) {
  const dense = arena.array("float32", 100);
  dense.set(values(100, seed));
  const grid = arena.tensor("float32", [ROWS, COLS]);
  (grid.data as Float32Array).set(values(ROWS * COLS, seed));
  const strided = new Tensor(grid.data, [ROWS, COLS / 2], "float32", { strides: [COLS, 2] });
  return { dense, strided };
}

/** What the strided view of batch `seed` holds, dense. */
function stridedValues(seed: number): number[] {
  const all = values(ROWS * COLS, seed);
  return Array.from({ length: ROWS * COLS / 2 }, (_, k) => all[Math.floor(k / (COLS / 2)) * COLS + (k % (COLS / 2)) * 2]!);
}

/**
 * Keeps the background thread busy for one emulated copy: a pageable leaf
 * without pinned staging, whose driver call blocks until its modelled end.
 * Plans submitted after it are staged only then.
 */
function blockBackgroundThread(): AsyncCopyHandle<unknown> {
  return startCopy({ block: new Uint8Array(1 << 16) }, "cuda:0", { usePinnedStaging: false });
}

/** While a copy uses the arena: busy, tryReset refuses, reset() waits. Returns that reset and whether it is over. */
async function expectBusy(arena: Arena, what: string): Promise<{ reset: Promise<void>; over: () => boolean }> {
  assert(arena.busy, `${what}: busy while a copy uses the arena`);
  assertSame(arena.tryReset(), false, `${what}: tryReset refuses while busy`);
  let over = false;
  const reset = arena.reset().then(() => void (over = true));
  await tick(5);
  assert(!over, `${what}: reset() waits for the copy`);
  return { reset, over: () => over };
}

/** The next batch, written where the first lay once reset() let it: never seen by the copy of the first. */
async function nextBatch(arena: Arena, reset: Promise<void>): Promise<void> {
  await reset;
  assert(!arena.busy, "idle once reset() resolved");
  fillBatch(arena, 9);
}

for (const background of [true, false]) {
  const mode = background ? "background thread" : "no background thread";

  busyTest(`startCopy to a GPU, a strided arena tensor, staged (${mode})`, async () => {
    using arena = Arena.create(1 << 16);
    const { strided } = fillBatch(arena, 1); // (dense leaves: pinned_arena.test.ts)
    await withCopyDelay(SLOW_US, async () => {
      const blocker = background ? blockBackgroundThread() : null;
      const handle = startCopy({ strided }, "cuda:0", { useBackgroundThread: background });
      const { reset } = await expectBusy(arena, "strided to cuda:0");
      await nextBatch(arena, reset);
      const onGpu = await handle;
      assertEquals(Array.from(onGpu.strided.toTensor().data as Float32Array), stridedValues(1));
      disposeAll(onGpu);
      if (blocker !== null) disposeAll(await blocker);
    });
  });

  busyTest(`copyInto from arena sources to a GPU, dense and strided (${mode})`, async () => {
    using arena = Arena.create(1 << 16);
    const { dense, strided } = fillBatch(arena, 2);
    const into = await startCopy({ dense: new Float32Array(100), strided: new Tensor(new Float32Array(32), [ROWS, COLS / 2]) }, "cuda:0");
    await withCopyDelay(SLOW_US, async () => {
      const blocker = background ? blockBackgroundThread() : null;
      const handle = copyInto({ dense, strided }, into, { useBackgroundThread: background });
      const { reset } = await expectBusy(arena, "copyInto to cuda:0");
      await nextBatch(arena, reset);
      assertSame(await handle, into);
      if (blocker !== null) disposeAll(await blocker);
    });
    assertEquals(Array.from(into.dense.toHost() as Float32Array), Array.from(values(100, 2)));
    assertEquals(Array.from(into.strided.toTensor().data as Float32Array), stridedValues(2));
    disposeAll(into);
  });

  busyTest(`copyInto between an arena and pageable host arrays: busy until the handle's own poll copies (${mode})`, async () => {
    using arena = Arena.create(1 << 16);
    const { dense } = fillBatch(arena, 3);
    const out = { dense: new Float32Array(100) };
    // From the arena: its bytes are read when the handle's poll copies them out.
    const reading = copyInto({ dense }, out, { useBackgroundThread: background });
    const first = await expectBusy(arena, "arena to pageable");
    assertSame(await reading, out);
    assert(!arena.busy, "idle once the handle's poll copied out");
    await first.reset;
    assertEquals(Array.from(out.dense), Array.from(values(100, 3)));
    // Into the arena: written by that poll too.
    const target = arena.array("float32", 100);
    const writing = copyInto({ a: values(100, 4) }, { a: target }, { useBackgroundThread: background });
    const second = await expectBusy(arena, "pageable to arena");
    await writing;
    assert(!arena.busy, "idle once the handle's poll copied in");
    assertEquals(Array.from(target), Array.from(values(100, 4)));
    await second.reset;
  });
}

busyTest("startCopy of a strided arena tensor to the host: busy until the copy read it", async () => {
  using arena = Arena.create(1 << 16);
  const { strided } = fillBatch(arena, 5);
  await withCopyDelay(SLOW_US, async () => {
    const blocker = blockBackgroundThread(); // the copy to the host runs after it, on the background thread
    const handle = startCopy({ strided }, "cpu");
    const { reset } = await expectBusy(arena, "strided to cpu");
    await nextBatch(arena, reset);
    const back = await handle;
    assertEquals(Array.from(back.strided.data as Float32Array), stridedValues(5));
    disposeAll([back, await blocker]);
  });
  // Without the background thread the copy is over when startCopy returns.
  const { strided: again } = fillBatch(arena, 6);
  const handle = startCopy({ again }, "cpu", { useBackgroundThread: false });
  assert(!arena.busy, "over already");
  assert(handle.ready());
  assertEquals(Array.from((await handle).again.data as Float32Array), stridedValues(6));
});

busyTest("copyInto from a GPU into arena and pageable destinations: busy past the device work, until the poll copies out", async () => {
  using arena = Arena.create(1 << 16);
  const onGpu = await startCopy({ a: values(100, 7), b: values(50, 8) }, "cuda:0");
  const into = { a: arena.array("float32", 100), b: new Float32Array(50) };
  await withCopyDelay(SLOW_US, async () => {
    const handle = copyInto(onGpu, into);
    const { reset, over } = await expectBusy(arena, "cuda:0 to arena and pageable");
    using done = handle.completionEvent()!;
    done.synchronize(); // the device work is over; nothing has copied out yet
    assert(arena.busy, "busy until the copy-out has written the arena");
    assertSame(arena.tryReset(), false);
    await tick(5);
    assert(!over(), "reset() still waits");
    await handle;
    assertSame(handle.stats().leavesDirect, 0, "not written in place: one destination is pageable");
    await reset;
  });
  assertEquals(Array.from(into.b), Array.from(values(50, 8)));
  disposeAll(onGpu);
});

busyTest("a copyInto whose copy-out never comes (disposed, or its destination gone) leaves the arena idle", async () => {
  using arena = Arena.create(1 << 16);
  const { dense } = fillBatch(arena, 10);
  const handle = copyInto({ dense }, { dense: new Float32Array(100) });
  assert(arena.busy);
  handle.dispose(); // drops the copy-out
  assert(!arena.busy, "idle once the handle is disposed");
  assert(arena.tryReset());
  const { dense: again } = fillBatch(arena, 11);
  const out = new Float32Array(100);
  const gone = copyInto({ again }, { again: out });
  (out.buffer as ArrayBuffer).transfer(); // detached in flight: the copy fails and writes nothing
  assert(arena.busy);
  while (!gone.ready()) await tick(1); // the ready() that finds it over fails it, and lets go
  assert(!arena.busy, "idle once the failed copy let go");
  gone.dispose();
});

busyTest("empty arena leaves are read by nothing: a copy of only them leaves the arena idle", async () => {
  using arena = Arena.create(1 << 16);
  const empty = arena.array("float32", 0);
  const onGpu = await startCopy({ empty }, "cuda:0");
  assertSame(onGpu.empty.byteLength, 0);
  assert(!arena.busy);
  const { dense } = fillBatch(arena, 12);
  await withCopyDelay(SLOW_US, async () => {
    const handle = startCopy({ empty, dense }, "cuda:0");
    assert(arena.busy, "busy for the leaf that has bytes");
    disposeAll([onGpu, await handle]);
  });
});

busyTest("the host touches an arena only after the earlier copy that writes it (by DMA) is over", async () => {
  using arena = Arena.create(1 << 16);
  const onGpu = await startCopy({ a: values(100, 13) }, "cuda:0");
  const slot = { a: arena.array("float32", 100) };
  for (const background of [true, false]) {
    await withCopyDelay(SLOW_US, async () => {
      const writing = copyInto(onGpu, slot); // the GPU writes the arena in place
      const out = new Float32Array(100);
      const reading = copyInto(slot, { a: out }, { useBackgroundThread: background }); // the host reads it
      while (!reading.ready()) await tick(1);
      assert(writing.ready(), "the host's read waited for the DMA that writes the arena");
      assertEquals(Array.from(out), Array.from(values(100, 13)));
      await writing;
    });
  }
  disposeAll(onGpu);
});

busyTest("startArenaCopy, prefetch and ToDevice over arena batches keep the arena busy while they copy", async () => {
  using arena = Arena.create(1 << 16);
  const { dense } = fillBatch(arena, 14);
  await withCopyDelay(SLOW_US, async () => {
    const whole = startArenaCopy(arena, "cuda:0");
    assert(arena.busy, "startArenaCopy");
    const onDevice = await whole;
    const batches = prefetch([{ dense }], "cuda:0");
    const first = batches.next(); // starts the copy once it has read the source (a microtask)
    await tick(0);
    assert(arena.busy, "prefetch");
    const got = await first;
    const toGpu = new ToDevice("cpu", "cuda:0").forwardAsync({ dense });
    assert(arena.busy, "ToDevice");
    disposeAll([onDevice, got.value, await toGpu]);
    await batches.return(undefined);
  });
});
