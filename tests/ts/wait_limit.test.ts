// Waiting with a limit (issue 26, item 12): handle.get({ timeoutMs, signal }),
// handle.wait({ signal, timeoutMs }) and prefetch's signal. A wait whose
// signal aborted rejects with the signal's reason, as fetch does (and the
// loader); one whose time ran out is an MtcError with code MTC_IN_PROGRESS.
// Either way the copy goes on, and the handle can still be awaited (the
// bytes are right), read or disposed.
import { copyInto, DeviceTensor, disposeAll, MtcError, poolStats, prefetch, startCopy } from "../../ts/mod.ts";
import { skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, test } from "./harness.ts";

const waitTest = (name: string, fn: () => void | Promise<void>) => test(`wait limit: ${name}`, fn, { skip: skipWithoutDriver });

const SLOW_US = 150_000; // each copy takes 150 ms on the emulated GPU

function values(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => seed + i);
}

/** Fails unless `e` is the MtcError of a wait whose time ran out. */
function stopped(e: MtcError, includes: string): void {
  assertSame(e.code, "MTC_IN_PROGRESS");
  assert(e.message.includes(includes), e.message);
  assert(e.message.includes("the copy goes on"), e.message);
}

waitTest("a signal aborted before the wait stops it at once; the handle is untouched", async () => {
  const controller = new AbortController();
  const reason = new RangeError("not wanted");
  controller.abort(reason);
  const h = startCopy({ x: values(8, 1) }, "cuda:0");
  // The signal's reason itself, as fetch rejects: wait() rejects with it, get() throws it.
  assertSame(await h.wait({ signal: controller.signal }).then(() => "resolved", (e: unknown) => e), reason);
  assertSame(assertThrows(() => h.get({ signal: controller.signal }), RangeError, "not wanted"), reason);
  const onGpu = await h;
  assertEquals(Array.from(onGpu.x.toHost()), Array.from(values(8, 1)));
  disposeAll(onGpu);
  h.dispose();
});

waitTest("abort during the wait: the wait rejects, the copy goes on, and the bytes are right", async () => {
  await withCopyDelay(SLOW_US, async () => {
    const controller = new AbortController();
    const h = startCopy({ x: values(1000, 2) }, "cuda:0");
    const waiting = h.wait({ signal: controller.signal });
    setTimeout(() => controller.abort(), 5);
    // A bare abort(): its reason is an AbortError DOMException, what fetch rejects with.
    const e = await assertRejects(() => waiting, DOMException);
    assertSame(e.name, "AbortError");
    assertSame(e, controller.signal.reason, "the signal's reason itself");
    const timedOut = await assertRejects(() => h.wait({ signal: AbortSignal.timeout(1) }), DOMException);
    assertSame(timedOut.name, "TimeoutError", "AbortSignal.timeout's reason");
    assertSame(h.ready(), false, "still copying");
    const onGpu = await h.wait(); // no limit now
    assertSame(h.ready(), true);
    assertEquals(Array.from(onGpu.x.toHost()), Array.from(values(1000, 2)));
    disposeAll(onGpu);
    h.dispose();
  });
});

waitTest("timeouts fire for get() and wait(); the copy then finishes as usual", async () => {
  const before = poolStats().plansLive;
  await withCopyDelay(SLOW_US, async () => {
    const h = startCopy([values(64, 3)], "cuda:0");
    const started = performance.now();
    stopped(assertThrows(() => h.get({ timeoutMs: 10 }), MtcError, "AsyncCopyHandle.get: the wait timed out after 10 ms"), "timed out");
    const blocked = performance.now() - started;
    assert(blocked >= 9 && blocked < SLOW_US / 1000, `get blocked ${blocked.toFixed(1)} ms for a 10 ms limit`);
    stopped(await assertRejects(() => h.wait({ timeoutMs: 10 }), MtcError, "timed out after 10 ms"), "timed out");
    stopped(await assertRejects(() => h.wait({ timeoutMs: 0 }), MtcError, "timed out after 0 ms"), "timed out");
    const onGpu = h.get({ timeoutMs: 10_000 }); // within the limit: the result
    assert(onGpu[0] instanceof DeviceTensor);
    assertSame(await h.wait({ timeoutMs: 0 }), onGpu, "over: even a 0 ms limit gives the result");
    assertEquals(Array.from(onGpu[0].toHost()), Array.from(values(64, 3)));
    disposeAll(onGpu);
    h.dispose();
  });
  // Under Deno a stopped wait's nonblocking call may still be on its way back
  // (it does nothing then); the plan goes when it returns. Not into the next test.
  for (let i = 0; i < 400 && poolStats().plansLive !== before; i++) await tick(5);
  assertSame(poolStats().plansLive, before);
});

waitTest("a limit that does not come leaves no timer or listener behind", async () => {
  const controller = new AbortController();
  const h = startCopy({ x: values(4, 4) }, "cuda:0");
  const onGpu = await h.wait({ signal: controller.signal, timeoutMs: 60_000 });
  controller.abort(); // after the wait: nothing happens
  assertSame(h.get({ signal: new AbortController().signal, timeoutMs: Infinity }), onGpu);
  disposeAll(onGpu);
  h.dispose();
  // Deno's op sanitizer fails this test if a timer was left running.
});

waitTest("a handle whose wait stopped can be disposed at once; nothing leaks", async () => {
  const before = poolStats();
  await withCopyDelay(SLOW_US, async () => {
    const h = startCopy({ x: values(256, 5) }, "cuda:0");
    stopped(await assertRejects(() => h.wait({ timeoutMs: 1 }), MtcError, "timed out"), "timed out");
    h.dispose(); // waits for the copy (its memory is in use), then frees everything
    await assertRejects(() => h.wait(), MtcError, "disposed");
    assertThrows(() => h.get({ timeoutMs: 1 }), MtcError, "disposed");
  });
  // Under Deno the stopped wait's nonblocking call still runs; the plan goes
  // when it returns (a loaded machine may take a while). Wait for that here,
  // so that it neither counts as a leak nor ends during the next test.
  for (let i = 0; i < 400 && poolStats().plansLive !== before.plansLive; i++) await tick(5);
  const after = poolStats();
  assertSame(after.plansLive, before.plansLive);
  assertSame(after.blocksLive, before.blocksLive);
});

waitTest("copyInto to the host: a wait that stopped writes nothing; the later wait writes the bytes", async () => {
  const onGpu = await startCopy({ a: values(100, 6) }, "cuda:0");
  const into = { a: new Float32Array(100) };
  await withCopyDelay(SLOW_US, async () => {
    const h = copyInto(onGpu, into);
    stopped(await assertRejects(() => h.wait({ timeoutMs: 5 }), MtcError, "timed out"), "timed out");
    assertSame(into.a[99], 0, "not written yet");
    assertSame(await h, into);
    assertEquals(Array.from(into.a), Array.from(values(100, 6)));
  });
  disposeAll(onGpu);
});

waitTest("bad limits are MtcErrors naming the option", async () => {
  const h = startCopy({ x: values(2, 7) }, "cpu");
  for (const [options, message] of [
    [{ timeoutMs: -1 }, "timeoutMs must be a number >= 0, got -1"],
    [{ timeoutMs: NaN }, "timeoutMs must be a number >= 0, got NaN"],
    [{ timeoutMs: "5" }, 'timeoutMs must be a number >= 0, got "5"'],
    [{ signal: {} }, "signal must be an AbortSignal, got an object"],
    [{ timeout: 5 }, 'unknown option "timeout"'],
    [null, "options must be an object, got null"],
  ] as [unknown, string][]) {
    const e = await assertRejects(() => h.wait(options as never), MtcError, `AsyncCopyHandle.wait: ${message}`);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
    assertThrows(() => h.get(options as never), MtcError, `AsyncCopyHandle.get: ${message}`);
  }
  h.dispose();
});

waitTest("prefetch: an abort ends the loop, disposes every copy not handed out, and closes the source", async () => {
  const before = poolStats();
  let closed = false;
  function* source() {
    try {
      for (let i = 0; i < 100; i++) yield { x: values(512, i) };
    } finally {
      closed = true;
    }
  }
  const controller = new AbortController();
  const seen: number[] = [];
  let error: unknown;
  await withCopyDelay(20_000, async () => {
    try {
      for await (const b of prefetch(source(), "cuda:0", { depth: 3, signal: controller.signal })) {
        seen.push(b.x.toHost()[0]!);
        disposeAll(b);
        if (seen.length === 2) controller.abort(); // the next batch's wait stops
      }
    } catch (e) {
      error = e;
    }
  });
  assertEquals(seen, [0, 1]);
  assert(error instanceof DOMException && error.name === "AbortError", `the signal's reason: ${String(error)}`);
  assertSame(error, controller.signal.reason);
  assert(closed, "the source iterator was closed");
  await tick(5);
  assertSame(poolStats().plansLive, before.plansLive);
  assertSame(poolStats().blocksLive, before.blocksLive);
  // An aborted signal stops the loop before it reads the source; a bad one is refused.
  const stop = new AbortController();
  const why = new Error("the epoch ended");
  stop.abort(why);
  let read = false;
  const once = (function* () {
    read = true;
    yield { x: values(1, 0) };
  })();
  assertSame(await prefetch(once, "cuda:0", { signal: stop.signal }).next().then(() => "resolved", (e: unknown) => e), why);
  assert(!read, "the source was not read");
  await assertRejects(() => prefetch([], "cpu", { signal: "now" as never }).next(), MtcError, "prefetch: signal must be an AbortSignal");
});
