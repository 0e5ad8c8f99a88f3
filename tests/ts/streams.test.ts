// Streams, events, the current stream, stream ordering of copies, completion
// events and plan stats, through the emulated driver (two devices) and its
// time model: copies and kernels move their stream's "busy until" time, and
// events complete then, so ordering shows in timings.
import {
  CudaEvent,
  currentStream,
  DeviceTensor,
  disposeAll,
  hasKernels,
  MtcError,
  poolStats,
  startCopy,
  Stream,
  Tensor,
  withStream,
} from "../../ts/mod.ts";
import { debugCopy, debugFill } from "../../ts/testing.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, note, test } from "./harness.ts";
import { randomLeaf } from "./random_tensors.ts";

/** A streams test; with `kernels`, skipped (and reported so) where libmtc has no kernels. */
const streamTest = (name: string, fn: () => void | Promise<void>, kernels = false) =>
  test(`streams: ${name}`, fn, { skip: skipWithoutDriver ?? (kernels && !hasKernels() ? NO_KERNELS : undefined) });

const NO_KERNELS = "this libmtc has no kernels: mtc_has_kernels() is 0";
if (skipWithoutDriver === undefined && !hasKernels()) note(`streams: the tests of kernels on streams skipped: ${NO_KERNELS}`);

const SPIN_US = 150_000; // a debug kernel's spin: long against everything else here

/** An unpacked device buffer of `bytes` bytes, filled with `value`. */
function deviceBuffer(bytes: number, value: number, device: "cuda:0" | "cuda:1" = "cuda:0"): DeviceTensor {
  return startCopy(new Uint8Array(bytes).fill(value), device, { packCpuTensors: false }).get();
}

// ------------------------------------------------------------- basics

streamTest("create, handle, synchronize, events, dispose", () => {
  const stream = Stream.create("cuda:1");
  assertSame(stream.device, "cuda:1");
  assertSame(stream.deviceIndex, 1);
  assert(stream.owned);
  assert(stream.handle > 0, "a raw CUstream");
  stream.synchronize();
  const event = stream.recordEvent();
  assert(event instanceof CudaEvent);
  assert(event.handle > 0, "a raw CUevent");
  event.synchronize();
  assertSame(event.query(), true);
  event.dispose();
  event.dispose();
  assertThrows(() => event.query(), MtcError, "disposed");
  stream.dispose();
  stream.dispose();
  assert(stream.disposed);
  const e = assertThrows(() => stream.recordEvent(), MtcError, "disposed");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
});

streamTest('"cuda" is the current device; "cpu" and bad handles are errors', () => {
  using stream = Stream.create("cuda");
  assertSame(stream.device, "cuda:0");
  assertThrows(() => Stream.create("cpu"), MtcError, '"cpu" has no streams');
  assertThrows(() => Stream.wrap(0, "cuda:0"), MtcError, "not a CUstream");
  assertThrows(() => Stream.wrap(-5, "cuda:0"), MtcError, "not a CUstream");
  assertSame(Stream.create(1).device, "cuda:1");
});

streamTest("wrap: a stream from elsewhere is used but never destroyed", () => {
  using mine = Stream.create("cuda:0");
  const wrapped = Stream.wrap(BigInt(mine.handle), "cuda:0");
  assertSame(wrapped.handle, mine.handle);
  assert(!wrapped.owned);
  wrapped.recordEvent().dispose();
  wrapped.dispose(); // not destroyed: the original still works
  mine.synchronize();
  mine.recordEvent().dispose();
});

streamTest("waitEvent and waitStream order one stream after another, across devices", async () => {
  using a = Stream.create("cuda:0");
  using b = Stream.create("cuda:1");
  await withCopyDelay(40_000, () => {
    const h = withStream(a, () => startCopy(new Float32Array(16), "cuda:0")); // `a` waits ~40 ms for it
    b.waitStream(a);
    using after = b.recordEvent();
    assertSame(after.query(), false, "b waits for a's copy");
    after.synchronize();
    assert(h.ready());
    disposeAll(h.get());
    h.dispose();
  });
});

// ----------------------------------------------------- current stream

streamTest("withStream: current per device, nested, restored on return and on throw", () => {
  using s0 = Stream.create("cuda:0");
  using t0 = Stream.create("cuda:0");
  using s1 = Stream.create("cuda:1");
  assertSame(currentStream("cuda:0"), null);
  const r = withStream(s0, () => {
    assertSame(currentStream("cuda:0"), s0);
    assertSame(currentStream(), s0, '"cuda" is cuda:0');
    assertSame(currentStream("cuda:1"), null);
    withStream(s1, () => {
      assertSame(currentStream("cuda:1"), s1);
      assertSame(currentStream("cuda:0"), s0);
      withStream(t0, () => assertSame(currentStream("cuda:0"), t0));
      assertSame(currentStream("cuda:0"), s0);
    });
    assertSame(currentStream("cuda:1"), null);
    return 42;
  });
  assertSame(r, 42);
  assertThrows(() => withStream(s0, () => {
    throw new MtcError(2, "inner");
  }), MtcError, "inner");
  assertSame(currentStream("cuda:0"), null);
  s0.dispose();
  assertThrows(() => withStream(s0, () => 1), MtcError, "disposed");
});

streamTest("withStream: an async scope keeps its stream until the promise settles", async () => {
  using s = Stream.create("cuda:0");
  const seen: (Stream | null)[] = [];
  const p = withStream(s, async () => {
    seen.push(currentStream("cuda:0"));
    await tick(5);
    seen.push(currentStream("cuda:0"));
    return "done";
  });
  seen.push(currentStream("cuda:0")); // still inside the pending scope (the documented caveat)
  assertSame(await p, "done");
  assertEquals(seen, [s, s, s]);
  assertSame(currentStream("cuda:0"), null);
  await withStream(s, async () => {
    throw new Error("x");
  }).catch(() => undefined);
  assertSame(currentStream("cuda:0"), null, "popped after a rejection");
});

streamTest("a disposed current stream makes startCopy fail cleanly", () => {
  const before = poolStats();
  const s = Stream.create("cuda:0");
  withStream(s, () => {
    s.dispose();
    assertThrows(() => startCopy(new Float32Array(4), "cuda:0"), MtcError, "was disposed");
  });
  assertSame(poolStats().plansLive, before.plansLive);
  assertSame(poolStats().blocksLive, before.blocksLive);
});

// ---------------------------------------------------------- ordering

streamTest("the target's current stream waits for the copy (time model)", async () => {
  using s = Stream.create("cuda:0");
  await withCopyDelay(40_000, () => {
    const h = withStream(s, () => startCopy({ x: new Float32Array([1, 2, 3]) }, "cuda:0"));
    using queuedAfter = s.recordEvent();
    assertSame(queuedAfter.query(), false, "work queued on s after startCopy waits for the copy");
    const out = h.get();
    queuedAfter.synchronize();
    assertEquals(out.x.toHost(), new Float32Array([1, 2, 3]));
    h.dispose();
    disposeAll(out);
  });
});

streamTest("without a current stream, the caller's streams do not wait for the copy", async () => {
  using s = Stream.create("cuda:0");
  await withCopyDelay(40_000, () => {
    const h = startCopy(new Float32Array(4), "cuda:0");
    using e = s.recordEvent();
    assertSame(e.query(), true, "s has nothing queued");
    disposeAll(h.get());
    h.dispose();
  });
});

streamTest("a source written by a kernel on its stream just before startCopy is copied with the written value", () => {
  for (const target of ["cpu", "cuda:1"] as const) { // (to cuda:0 it would be reused, not copied)
    using s = Stream.create("cuda:0");
    const src = deviceBuffer(4096, 1);
    debugFill(s, src, 0xab, { spinMicroseconds: SPIN_US });
    const t0 = performance.now();
    const h = withStream(s, () => startCopy(src, target));
    const out = h.get();
    const elapsed = performance.now() - t0;
    assert(elapsed >= SPIN_US / 1000 - 10, `→ ${target}: the copy waited for the fill (${elapsed.toFixed(1)} ms)`);
    const host = out instanceof DeviceTensor ? out.toHost() : out;
    assertEquals(host, new Uint8Array(4096).fill(0xab), `→ ${target}`);
    h.dispose();
    disposeAll([src, out]);
  }
}, true);

streamTest("a source on cuda:1 written on cuda:1's stream is captured for a copy to cuda:0", () => {
  using s1 = Stream.create("cuda:1");
  const src = deviceBuffer(1 << 16, 2, "cuda:1");
  debugFill(s1, src, 0x3c, { spinMicroseconds: SPIN_US });
  const t0 = performance.now();
  const out = withStream(s1, () => startCopy({ src, host: new Float32Array([5]) }, "cuda:0").get());
  assert(performance.now() - t0 >= SPIN_US / 1000 - 10, "waited for cuda:1's fill");
  assertSame(out.src.device, "cuda:0");
  assertEquals(out.src.toHost(), new Uint8Array(1 << 16).fill(0x3c));
  assertEquals(out.host.toHost(), new Float32Array([5]));
  disposeAll([src, out]);
}, true);

streamTest("a long kernel on the target stream: get() returns before it ends; work queued after sees the copy", () => {
  using t = Stream.create("cuda:0");
  const scratch = deviceBuffer(64, 0);
  const input = randomLeaf("uint8", [50_000], 7) as Uint8Array;
  const dst = deviceBuffer(input.byteLength, 0);
  debugFill(t, scratch, 1, { spinMicroseconds: SPIN_US });
  const h = withStream(t, () => startCopy(input, "cuda:0"));
  const out = h.get(); // waits for the copy only
  // Recorded after get() returned, behind the spin: not complete, so get() did not wait for it.
  using queued = t.recordEvent();
  assertSame(queued.query(), false, "the spin is still running");
  debugCopy(t, dst, out); // a kernel that reads the copy, queued after it on t
  t.synchronize();
  assertEquals(dst.toHost(), input);
  h.dispose();
  disposeAll([scratch, dst, out]);
}, true);

// --------------------------------------------------- completion events

streamTest("completionEvent: completes with the copy; null when nothing ran on a device or after get()", async () => {
  await withCopyDelay(30_000, () => {
    const h = startCopy([new Float32Array(8), new Int8Array(3)], "cuda:0");
    const done = h.completionEvent();
    assert(done !== null);
    assertSame(done.query(), false, "in flight");
    assert(done.handle > 0);
    using other = Stream.create("cuda:1");
    other.waitEvent(done); // cross-device wait
    using after = other.recordEvent();
    assertSame(after.query(), false);
    done.synchronize();
    assertSame(done.query(), true);
    assert(h.ready());
    const out = h.get();
    assertSame(h.completionEvent(), null, "the plan is released once the results are read");
    done.dispose();
    h.dispose();
    assertThrows(() => h.completionEvent(), MtcError, "disposed");
    disposeAll(out);
  });
  const hostOnly = startCopy({ a: new Float32Array(1) }, "cpu");
  assertSame(hostOnly.completionEvent(), null, "no plan: nothing to wait for");
});

// ------------------------------------------------------------- stats

streamTest("stats(): host to device, packed, and reused leaves counted", () => {
  const h = startCopy(makeExampleBatch(5), "cuda:0");
  const out = h.get();
  const stats = h.stats();
  assertSame(stats.leaves, 528);
  assertSame(stats.leavesReused, 0);
  assertSame(stats.leavesPacked, 528);
  assert(stats.chunks >= 1 && stats.blocks >= stats.chunks, JSON.stringify(stats));
  assertSame(stats.bytesCopied, 153_628);
  assert(stats.copiesIssued >= 1);
  assertSame(stats.deviceToHostPath, "none");
  assert(stats.submitNs >= 0 && stats.stagingNs >= 0);
  assertEquals(Object.keys(stats), [
    "leaves",
    "leavesReused",
    "leavesPacked",
    "chunks",
    "blocks",
    "bytesCopied",
    "copiesIssued",
    "pinnedReuses",
    "pinnedAllocations",
    "stagingNs",
    "submitNs",
    "deviceToHostPath",
    "leavesDirect",
    "bytesStaged",
  ]);
  h.dispose();
  assertEquals(h.stats(), stats, "kept after dispose");

  const mixed = startCopy({ a: out[0]!.gt_data.class_ids, b: new Float32Array(3) }, "cuda:0");
  const m = mixed.get();
  assertSame(m.a, out[0]!.gt_data.class_ids, "reused");
  assertSame(mixed.stats().leaves, 2);
  assertSame(mixed.stats().leavesReused, 1);
  assertSame(mixed.stats().bytesCopied, 12);
  mixed.dispose();
  disposeAll([out, m.b]);

  const noPlan = startCopy({ a: new Float32Array(2), b: [new Int8Array(1)] }, "cpu");
  assertSame(noPlan.stats().leaves, 2);
  assertSame(noPlan.stats().leavesReused, 2);
});

streamTest("stats(): device to host names its path", () => {
  const onGpu = startCopy(Array.from({ length: 40 }, (_, i) => new Float32Array([i, i + 1])), "cuda:0").get();
  const h = startCopy(onGpu, "cpu");
  const back = h.get();
  back.forEach((leaf, i) => assertEquals(leaf, new Float32Array([i, i + 1])));
  const path = h.stats().deviceToHostPath;
  if (hasKernels()) assertSame(path, "gather-kernel");
  else assert(path === "per-leaf" || path === "batched", path);
  assertSame(h.stats().leaves, 40);
  h.dispose();
  disposeAll([onGpu, back]);
});

// ------------------------------------------------- devices and sources

streamTest("mixed sources to one device: host leaves, cuda:0 and cuda:1 tensors, exact", () => {
  const a = randomLeaf("float64", [33], 1) as Float64Array;
  const b = randomLeaf("int32", [4, 4], 2) as Tensor;
  const c = randomLeaf("bfloat16", [17], 3) as Tensor;
  const on0 = startCopy(a, "cuda:0").get();
  const on1 = startCopy(b, "cuda:1").get();
  for (const target of ["cuda:0", "cuda:1"] as const) {
    const h = startCopy({ on0, on1, c, keep: "k" }, target);
    const out = h.get();
    for (const t of [out.on0, out.on1, out.c]) assertSame(t.device, target);
    assertSame(target === "cuda:0" ? out.on0 : out.on1, target === "cuda:0" ? on0 : on1, "reused on its own device");
    assertEquals(out.on0.toHost(), a);
    assertEquals(out.on1.toTensor().data, b.data);
    assertEquals(out.c.toTensor().data, c.data);
    assertSame(out.keep, "k");
    assertSame(h.stats().leavesReused, 1);
    h.dispose();
    disposeAll([out.c, target === "cuda:0" ? out.on1 : out.on0]);
  }
  disposeAll([on0, on1]);
});
