// ToDevice: forward, adjoint, normal, the transfer-stream registry, and the
// stream ordering it sets up, through the emulated driver with two devices.
import {
  AsyncCopyHandle,
  clearTransferStreams,
  DeviceTensor,
  disposeAll,
  hasKernels,
  Identity,
  MtcError,
  poolStats,
  releaseHostOutput,
  startCopy,
  Stream,
  Tensor,
  ToDevice,
  transferStream,
  withStream,
} from "../../ts/mod.ts";
import { debugFill } from "../../ts/testing.ts";
import { makeExampleBatch } from "../../examples/example_batch.ts";
import { skipWithoutDriver, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, note, test } from "./harness.ts";
import { randomLeaf } from "./random_tensors.ts";

const opTest = (name: string, fn: () => void | Promise<void>) => test(`ToDevice: ${name}`, fn, { skip: skipWithoutDriver });

opTest("forward moves host → GPU, the adjoint moves back, normal() is the identity", async () => {
  const batch = makeExampleBatch(4);
  const op = new ToDevice("cpu", "cuda:0");
  assertSame(op.source, "cpu");
  assertSame(op.target, "cuda:0");
  const onGpu = op.forward(batch);
  assert(onGpu[0]!.cams_gt[0]!.depths instanceof DeviceTensor);
  assertSame(onGpu[0]!.cams_gt[0]!.depths.device, "cuda:0");
  const adj = op.adjoint();
  assertSame(adj.source, "cuda:0");
  assertSame(adj.target, "cpu");
  assertSame(adj.adjoint(), op, "the adjoint of the adjoint is the operator");
  const back = await adj.forwardAsync(onGpu);
  assertEquals(back, batch);
  const normal = op.normal();
  assert(normal instanceof Identity);
  assertSame(normal.forward(batch), batch, "a round trip is lossless: the input itself");
  assertSame(normal.adjoint(), normal);
  const h = normal.forwardAsync(batch);
  assert(h instanceof AsyncCopyHandle);
  assertSame(await h, batch);
  releaseHostOutput(back);
  disposeAll(onGpu);
});

opTest("GPU → GPU with compute streams: values exact; the target's compute stream and the transfer stream wait", async () => {
  using c0 = Stream.create("cuda:0");
  using c1 = Stream.create("cuda:1");
  const input = [randomLeaf("float32", [100], 1), randomLeaf("int64", [3, 7], 2), randomLeaf("bool", [9], 3)];
  const on0 = startCopy(input, "cuda:0").get();
  const op = new ToDevice({ device: "cuda:0", computeStream: c0 }, { device: "cuda:1", computeStream: c1 });
  const on1 = await withCopyDelay(40_000, () => {
    const h = op.forwardAsync(on0);
    using targetSide = c1.recordEvent();
    using transferSide = op.transferStream!.recordEvent();
    assertSame(targetSide.query(), false, "the target's compute stream waits for the transfer");
    assertSame(transferSide.query(), false, "the transfer stream waits for the transfer");
    const on1 = h.get();
    h.dispose();
    targetSide.synchronize();
    transferSide.synchronize();
    return on1;
  });
  on1.forEach((t, i) => {
    assertSame(t.device, "cuda:1");
    const expected = input[i]!;
    assertEquals(t.toTensor().data, expected instanceof Tensor ? expected.data : expected);
  });
  // And back, through the adjoint (cuda:1 → cuda:0).
  const again = op.adjoint().forward(on1);
  again.forEach((t, i) => assertEquals(t.toTensor().data, on0[i]!.toTensor().data));
  disposeAll([on0, on1, again]);
});

opTest("the transfer waits for the source's compute stream", async () => {
  using c0 = Stream.create("cuda:0");
  const src = startCopy(new Float64Array([1, 2, 3]), "cuda:0").get();
  const op = new ToDevice({ device: "cuda:0", computeStream: c0 }, "cuda:1");
  const spinMs = 60;
  let busy: AsyncCopyHandle<DeviceTensor> | null = null;
  const t0 = performance.now();
  if (hasKernels()) {
    debugFill(c0, src, 0x11, { spinMicroseconds: spinMs * 1000 });
  } else {
    // No kernels: keep c0 busy with a slow copy that c0 waits for.
    // (Wrapped: a handle is a thenable, and returning it from an async function would await it.)
    busy = (await withCopyDelay(spinMs * 1000, () => ({ h: withStream(c0, () => startCopy(new Uint8Array(8), "cuda:0")) }))).h;
    note("ToDevice: source ordering checked with a slow copy (no kernels)");
  }
  // c0 is busy for ~spinMs from t0: the transfer must come after it.
  const out = op.forward(src);
  const elapsed = performance.now() - t0;
  if (busy !== null) {
    disposeAll(busy.get());
    busy.dispose();
  }
  assert(elapsed >= spinMs * 0.5, `the transfer waited for c0 (${elapsed.toFixed(1)} ms)`);
  const expected = hasKernels() ? new Uint8Array(24).fill(0x11) : new Uint8Array(new Float64Array([1, 2, 3]).buffer);
  assertEquals(new Uint8Array(out.toTensor().data.buffer), expected);
  disposeAll([src, out]);
});

opTest("one transfer stream per device pair, shared through the registry", () => {
  clearTransferStreams();
  const a = new ToDevice("cuda:0", "cuda:1");
  const b = new ToDevice("cuda:0", { device: "cuda:1" });
  const s = a.transferStream!;
  assertSame(b.transferStream, s, "ToDevice instances of one pair share it");
  assertSame(transferStream("cuda:0", "cuda:1"), s);
  assertSame(s.device, "cuda:0", "a GPU source's stream lives on the source");
  const back = a.adjoint().transferStream!;
  assert(back !== s, "the reverse pair has its own");
  assertSame(back.device, "cuda:1");
  const h2d = new ToDevice("cpu", "cuda:1").transferStream!;
  assertSame(h2d.device, "cuda:1", "a host source's stream lives on the target");
  assertSame(new ToDevice("cuda:0", "cpu").transferStream!.device, "cuda:0");
  assertSame(new ToDevice("cpu", "cpu").transferStream, null);
  assertSame(new ToDevice("cuda:1", "cuda:1").transferStream, null);
  using mine = Stream.create("cuda:0");
  assertSame(new ToDevice({ device: "cuda:0", transferStream: mine }, "cuda:1").transferStream, mine, "a spec's own transfer stream wins");
  clearTransferStreams();
  assert(s.disposed);
  const fresh = a.transferStream!;
  assert(fresh !== s && !fresh.disposed, "made again on next use");
  clearTransferStreams();
});

opTest("registry streams are made on first use, not at construction", () => {
  clearTransferStreams();
  const op = new ToDevice("cuda:1", "cuda:0");
  const x = startCopy(new Int32Array([5, 6]), "cuda:1").get();
  const y = op.forward(x);
  assertEquals(y.toHost(), new Int32Array([5, 6]));
  assertSame(op.transferStream, transferStream("cuda:1", "cuda:0"));
  disposeAll([x, y]);
  clearTransferStreams();
});

opTest("host → GPU: the target's compute stream waits; same-device and cpu → cpu reuse", async () => {
  using c0 = Stream.create("cuda:0");
  const op = new ToDevice("cpu", { device: "cuda:0", computeStream: c0 });
  await withCopyDelay(30_000, () => {
    const h = op.forwardAsync({ x: new Float32Array([9]) });
    using after = c0.recordEvent();
    assertSame(after.query(), false);
    const out = h.get();
    h.dispose();
    assertEquals(out.x.toHost(), new Float32Array([9]));
    disposeAll(out);
  });
  const onGpu = startCopy(new Float32Array([1]), "cuda:0").get();
  assertSame(new ToDevice("cuda:0", "cuda:0").forward(onGpu), onGpu);
  const host = new Float32Array([2]);
  assertSame(new ToDevice("cpu", "cpu").forward(host), host);
  onGpu.dispose();
});

opTest("bad specs are MtcErrors", () => {
  using s1 = Stream.create("cuda:1");
  assertThrows(() => new ToDevice({ device: "cuda:0", computeStream: s1 }, "cpu"), MtcError, "computeStream belongs to cuda:1, not cuda:0");
  assertThrows(() => new ToDevice("cpu", { device: "cpu", computeStream: s1 }), MtcError, "not cpu");
  assertThrows(() => new ToDevice("gpu" as never, "cpu"), MtcError, "invalid device");
  assertThrows(() => new ToDevice({ device: "cuda:0", transferStream: {} as Stream }, "cpu"), MtcError, "must be a Stream");
});

opTest("nothing leaks: plans, blocks", () => {
  const before = poolStats();
  const op = new ToDevice("cpu", "cuda:1");
  for (let i = 0; i < 5; i++) disposeAll(op.forward(makeExampleBatch(i)));
  const after = poolStats();
  assertSame(after.plansLive, before.plansLive);
  assertSame(after.blocksLive, before.blocksLive);
});
