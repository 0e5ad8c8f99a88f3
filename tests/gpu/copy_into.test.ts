// The GPU suite's copyInto tests: every direction on one real GPU (and
// between two where the host has them: every kind of destination, with the
// path each took), byte-exact against random data, and the stream order of
// writes into buffers a kernel is still using. Run as
// the rest of tests/gpu (see gpu.test.ts).
import { copyInto, type DeviceTensor, disposeAll, hasKernels, startCopy, Stream, Tensor, type TypedArray, withStream } from "../../ts/mod.ts";
import { debugCopy, debugFill } from "../../ts/testing.ts";
import { assert, assertEquals, assertSame, note } from "../ts/harness.ts";
import { copyAcross, DESTINATION_KINDS, destinations, leafCount, OWN_LEAVES, peerBatch } from "../ts/peer_batch.ts";
import { bytesOf, DTYPES, randomLeaf } from "../ts/random_tensors.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";

type HostLeaf = TypedArray | Tensor;

/** Every dtype, 1-D and 2-D, and one leaf of 1 MiB (copied on its own, not packed). */
function randomBatch(seed: number): HostLeaf[] {
  return [
    ...DTYPES.flatMap((dtype, i) => [randomLeaf(dtype, [5 + i], seed + 2 * i), randomLeaf(dtype, [7, 3], seed + 2 * i + 1)]),
    randomLeaf("float32", [1 << 18], seed + 99),
  ];
}

function zerosLike(batch: HostLeaf[]): HostLeaf[] {
  return batch.map((leaf) => {
    const data = leaf instanceof Tensor ? leaf.data : leaf;
    const zeros = new (data.constructor as new (n: number) => TypedArray)(data.length);
    return leaf instanceof Tensor ? new Tensor(zeros, leaf.shape, leaf.dtype) : zeros;
  });
}

function assertHolds(onGpu: DeviceTensor[], expected: HostLeaf[]): void {
  onGpu.forEach((t, i) => assertEquals(bytesOf(t.toHost()), bytesOf(expected[i]!), `leaf ${i} (${t.dtype})`));
}

for (const packed of [true, false]) {
  const kind = packed ? "views into one block" : "blocks of their own";
  gpuTest(`copyInto host -> GPU -> GPU -> host, into ${kind}`, async () => {
    const source = randomBatch(500);
    const buffers = await startCopy(zerosLike(source), DEVICE, { packCpuTensors: packed });
    const second = await startCopy(zerosLike(source), DEVICE, { packCpuTensors: packed });
    if (packed) assertSame(buffers[0]!.block, buffers[1]!.block);
    const addresses = buffers.map((t) => t.address);

    assertSame(await copyInto(source, buffers), buffers, "host -> GPU gives the destination back");
    assertEquals(buffers.map((t) => t.address), addresses);
    assertHolds(buffers, source);

    assertSame(await copyInto(buffers, second), second, "GPU -> GPU, the same device");
    assertHolds(second, source);

    const back = zerosLike(source);
    assertSame(await copyInto(second, back), back, "GPU -> host");
    back.forEach((leaf, i) => assertEquals(bytesOf(leaf), bytesOf(source[i]!), `leaf ${i}`));

    // Again with other data into the same buffers, as a decode step does.
    const next = randomBatch(600);
    copyInto(next, buffers, { useBackgroundThread: false }).get();
    assertHolds(buffers, next);
    disposeAll([buffers, second]);
  });
}

gpuTest("copyInto: packed host leaves take one scatter launch (a small chunk, read in pinned staging) or one DMA and one launch (over 64 KiB)", async () => {
  for (const [n, issued] of [[[3, 2, 1], 1], [[12_000, 6_000, 1], 2]] as const) {
    const source = { a: Int32Array.from({ length: n[0] }, (_, i) => i + 1), b: Float64Array.from({ length: n[1] }, (_, i) => i / 2), c: new Uint8Array(n[2]).fill(6) };
    const buffers = await startCopy({ a: new Int32Array(n[0]), b: new Float64Array(n[1]), c: new Uint8Array(n[2]) }, DEVICE);
    const h = copyInto(source, buffers);
    await h;
    assertSame(h.stats().copiesIssued, hasKernels() ? issued : 3, "the scatter launch, after a DMA for the larger chunk (without kernels: a DMA a leaf)");
    assertEquals(Array.from(buffers.a.toHost() as Int32Array), Array.from(source.a));
    assertEquals(Array.from(buffers.b.toHost() as Float64Array), Array.from(source.b));
    assertEquals(Array.from(buffers.c.toHost() as Uint8Array), Array.from(source.c));
    h.dispose();
    disposeAll(buffers);
  }
});

gpuTest("copyInto on a stream: writes after the kernel still using the buffers, and the stream sees the copy", async () => {
  const stream = Stream.create(DEVICE);
  const source = { x: randomLeaf("uint8", [1 << 16], 700) as Uint8Array, y: randomLeaf("uint8", [100], 701) as Uint8Array };
  const buffers = await startCopy({ x: new Uint8Array(1 << 16), y: new Uint8Array(100) }, DEVICE);
  const seen = await startCopy({ x: new Uint8Array(1 << 16) }, DEVICE);
  // A kernel that spins 50 ms, then fills x: the copy must land after it.
  debugFill(stream, buffers.x, 0xee, { spinMicroseconds: 50_000 });
  const h = withStream(stream, () => copyInto(source, buffers));
  // A kernel queued after the copy reads what it wrote.
  debugCopy(stream, seen.x, buffers.x);
  await h;
  stream.synchronize();
  assertEquals(bytesOf(buffers.x.toHost() as Uint8Array), source.x, "the copy came after the fill");
  assertEquals(bytesOf(buffers.y.toHost() as Uint8Array), source.y);
  assertEquals(bytesOf(seen.x.toHost() as Uint8Array), source.x, "the stream waited for the copy");
  stream.dispose();
  disposeAll([buffers, seen]);
}, { kernels: true });

gpuTest("copyInto host -> host", async () => {
  const source = randomBatch(800);
  const out = zerosLike(source);
  await copyInto(source, out);
  out.forEach((leaf, i) => assertEquals(bytesOf(leaf), bytesOf(source[i]!), `host leaf ${i}`));
});

gpuTest("copyInto between two GPUs", async () => {
  const source = randomBatch(800);
  const onGpu1 = await startCopy(source, "cuda:1");
  const buffers = await startCopy(zerosLike(source), DEVICE);
  await copyInto(onGpu1, buffers);
  assertHolds(buffers, source);
  assert(buffers.every((t) => t.device === DEVICE));
  disposeAll([onGpu1, buffers]);
}, { gpus: 2 });

for (const [from, to] of [["cuda:1", "cuda:0"], ["cuda:0", "cuda:1"]] as const) {
  gpuTest(`copyInto ${from} → ${to}, every dtype, packed and own leaves, into every kind of destination: byte-exact, one gather launch into libmtc's blocks where the pair has peer access`, async () => {
    const batch = peerBatch(900);
    const leaves = leafCount(batch);
    const gathered = hasKernels() ? 1 + OWN_LEAVES : leaves;
    const onSource = await startCopy(batch, from);
    // startCopy between the pair tells whether it has peer access: its outputs are always libmtc's blocks.
    const probe = startCopy(onSource, to);
    const probeOut = await probe;
    const startIssued = probe.stats().copiesIssued;
    assert(startIssued === gathered || startIssued === leaves, `startCopy ${from} → ${to}: ${startIssued} copies issued`);
    note(`gpu: ${from} → ${to}: ${startIssued === gathered && hasKernels() ? "peer access: gather launches" : "peer copies"}`);
    for (const kind of DESTINATION_KINDS) {
      const buffers = await destinations(to, kind);
      const issued = await copyAcross(onSource, buffers, batch);
      // Into blocks of libmtc's, copyInto takes startCopy's path; into memory it knows no block of, a peer copy a leaf.
      assertSame(issued, kind === "dlpack" ? leaves : startIssued, `copyInto ${from} → ${to} into ${kind}: copies issued`);
      disposeAll(buffers);
    }
    probe.dispose();
    disposeAll([onSource, probeOut]);
  }, { gpus: 2 });
}
