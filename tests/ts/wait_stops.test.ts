// A wait that gives up stops working: once `wait({ timeoutMs })`, a signal
// or `get({ timeoutMs })` stopped, nothing polls the copy on its behalf, so
// a copyInto's host destinations are written only by a later call on the
// handle (RELIABILITY.md, rule 4). And the options of get() and wait() are
// read once, first: user code inside them (getters, Proxy traps, a signal's
// own properties) cannot pull the handle from under the call.
import { copyInto, disposeAll, MtcError, poolStats, startCopy } from "../../ts/mod.ts";
import type { AsyncCopyHandle } from "../../ts/mod.ts";
import { skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, test } from "./harness.ts";

const waitTest = (name: string, fn: () => void | Promise<void>) => test(`wait stops: ${name}`, fn, { skip: skipWithoutDriver });

const SLOW_US = 100_000;

function values(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => seed + i);
}

/** Waits, touching nothing of the handle's but its completion event, until its device work is over; then a while more. */
async function deviceWorkOver(handle: AsyncCopyHandle<unknown>): Promise<void> {
  using done = handle.completionEvent()!;
  while (!done.query()) await tick(2);
  await tick(30); // long past any poll a stopped wait could still have had queued
}

/** How each kind of limited wait is given up. */
const GIVE_UPS: [string, (h: AsyncCopyHandle<unknown>) => Promise<unknown>][] = [
  ["wait({ timeoutMs })", (h) => assertRejects(() => h.wait({ timeoutMs: 5 }), MtcError, "timed out")],
  ["wait({ signal })", (h) => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 5);
    return assertRejects(() => h.wait({ signal: controller.signal }), DOMException);
  }],
  ["two waits at once", (h) => Promise.all([
    assertRejects(() => h.wait({ timeoutMs: 3 }), MtcError, "timed out"),
    assertRejects(() => h.wait({ signal: AbortSignal.timeout(6) }), DOMException),
  ])],
  ["get({ timeoutMs })", (h) => Promise.resolve(assertThrows(() => h.get({ timeoutMs: 5 }), MtcError, "timed out"))],
];

for (const [how, giveUp] of GIVE_UPS) {
  waitTest(`${how} on a copyInto to pageable host memory: nothing is written until the handle is called again`, async () => {
    const onGpu = await startCopy({ a: values(100, 1), b: values(30, 500) }, "cuda:0");
    const into = { a: new Float32Array(100), b: new Float32Array(30) };
    await withCopyDelay(SLOW_US, async () => {
      const handle = copyInto(onGpu, into);
      await giveUp(handle);
      await deviceWorkOver(handle);
      assertSame(into.a[99], 0, "no wait writes the destination once it gave up");
      assertSame(into.b[0], 0);
      assertSame(await handle, into, "a later await writes it");
    });
    assertEquals(Array.from(into.a), Array.from(values(100, 1)));
    assertEquals(Array.from(into.b), Array.from(values(30, 500)));
    disposeAll(onGpu);
  });
}

waitTest("a wait that gave up beside an await without a limit: the await still writes the destination", async () => {
  const onGpu = await startCopy({ a: values(64, 7) }, "cuda:0");
  const into = { a: new Float32Array(64) };
  await withCopyDelay(SLOW_US, async () => {
    const handle = copyInto(onGpu, into);
    const awaited = handle.then((v) => v);
    await assertRejects(() => handle.wait({ timeoutMs: 2 }), MtcError, "timed out");
    assertSame(await awaited, into);
  });
  assertEquals(Array.from(into.a), Array.from(values(64, 7)));
  disposeAll(onGpu);
});

/** Each method's options object, as a getter or a Proxy trap that disposes `handle` while the options are read. */
function disposingOptions(handle: AsyncCopyHandle<unknown>): [string, object][] {
  return [
    ["a timeoutMs getter", { get timeoutMs() { handle.dispose(); return 10_000; } }],
    ["a signal getter", { get signal() { handle.dispose(); return undefined; } }],
    ["a Proxy's ownKeys trap", new Proxy({}, { ownKeys: () => (handle.dispose(), []) })],
  ];
}

waitTest("get() and wait() whose options dispose the handle: MTC_ERR_INVALID_STATE, nothing leaked", async () => {
  const before = poolStats();
  for (const method of ["get", "wait"] as const) {
    for (let k = 0; k < 3; k++) {
      await withCopyDelay(20_000, async () => {
        const handle = startCopy({ x: values(16, k) }, "cuda:0");
        const [what, options] = disposingOptions(handle)[k]!;
        const call = () => method === "get" ? handle.get(options) : handle.wait(options);
        const e = method === "get" ? assertThrows(call, MtcError, "disposed") : await assertRejects(() => call() as Promise<unknown>, MtcError, "disposed");
        assertSame(e.code, "MTC_ERR_INVALID_STATE", `${method} with ${what}`);
        assert(e.message.startsWith(`AsyncCopyHandle.${method}: `), e.message);
      });
    }
  }
  for (let i = 0; i < 200 && poolStats().plansLive !== before.plansLive; i++) await tick(5); // Deno: a nonblocking wait returning
  assertSame(poolStats().plansLive, before.plansLive);
  assertSame(poolStats().blocksLive, before.blocksLive);
});

waitTest("a signal is read through the engine: its own properties are never called, and a forged one is refused", async () => {
  const handle = startCopy({ x: values(16, 3) }, "cuda:0");
  let calls = 0;
  const signal = new AbortController().signal;
  for (const name of ["aborted", "reason", "addEventListener", "removeEventListener"]) {
    Object.defineProperty(signal, name, { get() { calls++; handle.dispose(); return () => {}; } });
  }
  await withCopyDelay(20_000, async () => {
    const onGpu = handle.get({ signal, timeoutMs: 10_000 });
    assertSame(await handle.wait({ signal, timeoutMs: 10_000 }), onGpu);
    assertEquals(Array.from(onGpu.x.toHost()), Array.from(values(16, 3)));
    disposeAll(onGpu);
  });
  assertSame(calls, 0, "no own property of the signal was read");
  const forged = Object.create(AbortSignal.prototype) as AbortSignal;
  const e = assertThrows(() => handle.get({ signal: forged }), MtcError, "AsyncCopyHandle.get: signal must be an AbortSignal");
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  await assertRejects(() => handle.wait({ signal: forged }), MtcError, "AsyncCopyHandle.wait: signal must be an AbortSignal");
  handle.dispose();
});
