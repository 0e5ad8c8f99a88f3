// The GPU suite's copyInto rules on a real GPU, repeated to catch what one
// run would miss: aliasing refused (a swap inside one packed block would
// otherwise race inside one gather launch), a gather whose destinations sit
// in the same block as its sources byte-exact, two copies into one
// destination landing in submission order, and host destinations written
// only by the handle's own ready()/get()/await. Run as the rest of
// tests/gpu (see gpu.test.ts).
import { copyInto, type DeviceTensor, disposeAll, MtcError, releaseHostOutput, startCopy, Stream, withStream } from "../../ts/mod.ts";
import { assert, assertEquals, assertThrows } from "../ts/harness.ts";
import { DEVICE, fake, gpuTest, withCopyDelay } from "./gpu_env.ts";

const ROUNDS = 200;
const LEAVES = 64;

function leaf(n: number, seed: number): Int32Array {
  const a = new Int32Array(n);
  for (let i = 0; i < n; i++) a[i] = seed * 100_000 + i;
  return a;
}

gpuTest("copyInto aliasing in one packed block: a swap is refused every time; disjoint halves gather byte-exact", async () => {
  // 2 x LEAVES leaves packed into one block: the first half copied onto the second.
  const host = Array.from({ length: 2 * LEAVES }, (_, i) => leaf(17 + ((i % LEAVES) % 7), i));
  const block = await startCopy(host, DEVICE) as unknown as DeviceTensor[];
  assert(block.every((t) => t.block === block[0]!.block), "one packed block");
  const first = block.slice(0, LEAVES), second = block.slice(LEAVES);
  let wrong = 0;
  for (let round = 0; round < ROUNDS; round++) {
    // A swap of two halves' leaves (sizes permitting) is refused before anything runs.
    const e = assertThrows(() => copyInto([first[0], first[7]], [first[7], first[0]]), MtcError);
    assert(/overlaps the source of/.test(e.message), e.message);
    // Fresh data into the first half, then one gather launch into the second.
    const data = host.slice(0, LEAVES).map((a, i) => leaf(a.length, round * 1000 + i));
    await copyInto(data, first);
    await copyInto(first, second);
    const back = await startCopy(second, "cpu") as unknown as Int32Array[];
    for (let i = 0; i < LEAVES; i++) if (back[i]!.some((v, k) => v !== data[i]![k])) wrong++;
    releaseHostOutput(back);
  }
  assertEquals(wrong, 0, "leaves not byte-exact");
  disposeAll(block);
});

gpuTest("copyInto into one device destination lands in submission order (background, then the calling thread or a stream)", async () => {
  // Each round: a pageable copy keeps the background thread busy, a copy
  // into `target` waits in its queue, and a later one into `target` is
  // submitted on this thread (useBackgroundThread off, or a stream of ours
  // on the target), which must not overtake it. On the emulated driver the
  // busy copy takes a modelled 300 ms (a pageable copy blocks its thread
  // for it), far longer than the next two submissions: one round of each
  // kind fails every time where the order is not kept.
  const rounds = fake === null ? ROUNDS : 2;
  const target = await startCopy({ v: new Int32Array(256) }, DEVICE) as unknown as { v: DeviceTensor };
  const busyTarget = await startCopy({ v: new Int32Array(1 << 20) }, DEVICE) as unknown as { v: DeviceTensor };
  using stream = Stream.create(DEVICE);
  let wrong = 0;
  for (let round = 0; round < rounds; round++) {
    const big = leaf(1 << 20, round);
    const earlier = leaf(256, round);
    const later = leaf(256, round + 1);
    const submit = () => {
      const h0 = copyInto({ v: big }, busyTarget, { useBackgroundThread: true, usePinnedStaging: false });
      const h1 = copyInto({ v: earlier }, target, { useBackgroundThread: true });
      const h2 = round % 2 === 0
        ? copyInto({ v: later }, target, { useBackgroundThread: false })
        : withStream(stream, () => copyInto({ v: later }, target));
      return [h0, h1, h2] as const;
    };
    const [h0, h1, h2] = await withCopyDelay(300_000, submit);
    await h2;
    await h1;
    await h0;
    if ((target.v.toHost() as Int32Array)[0] !== later[0]) wrong++;
  }
  assertEquals(wrong, 0, "rounds that ended with the earlier copy's bytes");
  disposeAll([target, busyTarget]);
});

gpuTest("copyInto GPU -> host: written by the handle's own wait, later copies win whatever the await order, a detached destination is refused", async () => {
  const a = leaf(4096, 1), b = leaf(4096, 2);
  const onGpu = await startCopy({ a, b }, DEVICE) as unknown as { a: DeviceTensor; b: DeviceTensor };
  let wrong = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const out = new Int32Array(4096);
    const h1 = copyInto({ v: onGpu.a }, { v: out });
    const h2 = copyInto({ v: onGpu.b }, { v: out });
    const done = h2.completionEvent();
    done?.synchronize();
    done?.dispose();
    if (out[0] !== 0) wrong++; // the device work is over; nothing written yet
    await h2;
    await h1;
    if (out[0] !== b[0] || out[4095] !== b[4095]) wrong++;
  }
  assertEquals(wrong, 0, "rounds written early or left with the earlier copy's bytes");
  const detached = new Int32Array(4096);
  const h = copyInto({ v: onGpu.a }, { v: detached });
  const moved = detached.buffer.transfer();
  assertThrows(() => h.get(), MtcError, "detached");
  assert(new Int32Array(moved).every((v) => v === 0), "the moved buffer was written");
  disposeAll(onGpu);
});
