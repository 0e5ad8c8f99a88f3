// copyInto between the emulated driver's two GPUs (cuda:1 → cuda:0), every
// dtype in odd shapes, packed and own leaves, byte-exact: one gather launch
// on cuda:1 for the packed leaves when every destination is a block of
// libmtc's (startCopy's results, DeviceTensor.empty / zeros) and the pair
// has peer access; one peer copy a leaf into memory libmtc knows no block
// of (a DLPack import), and without peer access (a child process with
// FAKE_CUDA_NO_PEER=1), with the reason in MTC_TRACE's timeline. Skipped,
// saying so, when MTC_CUDA_DRIVER is unset.
import { copyInto, type DeviceTensor, disposeAll, hasKernels, startCopy } from "../../ts/mod.ts";
import { runScript } from "./fixtures/spawn.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, test } from "./harness.ts";
import { bytesOf } from "./random_tensors.ts";
import { copyAcross, DESTINATION_KINDS, destinations, leafCount, OWN_LEAVES, peerBatch } from "./peer_batch.ts";

const skip = skipWithoutDriver;
const peerTest = (name: string, fn: () => void | Promise<void>) => test(`copyInto between GPUs: ${name}`, fn, { skip, timeout: 60_000 });

/** copiesIssued of a copy of peerBatch: one launch and the own leaves, or a copy a leaf. */
function expected(gathered: boolean): number {
  const leaves = leafCount(peerBatch(0));
  return gathered && hasKernels() ? 1 + OWN_LEAVES : leaves;
}

for (const kind of DESTINATION_KINDS) {
  const ours = kind !== "dlpack";
  peerTest(`cuda:1 → cuda:0 into ${kind}: ${ours ? "one gather launch" : "a peer copy a leaf (no block of libmtc's)"}, byte-exact`, async () => {
    const batch = peerBatch(100);
    const onGpu1 = await startCopy(batch, "cuda:1");
    const buffers = await destinations("cuda:0", kind);
    assertSame(await copyAcross(onGpu1, buffers, batch), expected(ours), "copies issued");
    // Again, into the same buffers with other bytes (a decode step's reuse).
    const next = peerBatch(200);
    const again = await startCopy(next, "cuda:1");
    assertSame(await copyAcross(again, buffers, next), expected(ours), "copies issued, again");
    disposeAll([onGpu1, again, buffers]);
  });
}

peerTest("one destination of memory libmtc knows no block of sends every packed leaf of its source by peer copy", async () => {
  const batch = peerBatch(400);
  const onGpu1 = await startCopy(batch, "cuda:1");
  const buffers = await destinations("cuda:0", "zeros");
  const foreign = await destinations("cuda:0", "dlpack");
  const mixed = { ...buffers, int32_v: foreign.int32_v! };
  assertSame(await copyAcross(onGpu1, mixed, batch), expected(false));
  disposeAll([onGpu1, buffers, foreign]);
});

peerTest("host, cuda:0 and cuda:1 leaves in one copy into cuda:0 blocks, and two copies into one destination land in order", async () => {
  const batch = peerBatch(500);
  const keys = Object.keys(batch);
  const onGpu0 = await startCopy(batch, "cuda:0") as unknown as Record<string, DeviceTensor>;
  const onGpu1 = await startCopy(batch, "cuda:1") as unknown as Record<string, DeviceTensor>;
  const source: Record<string, unknown> = {};
  keys.forEach((key, i) => source[key] = [batch[key], onGpu0[key], onGpu1[key]][i % 3]);
  const buffers = await destinations("cuda:0", "views");
  await copyAcross(source, buffers, batch);
  // cuda:1 → buffers, then host → buffers, not awaited in between: the later one's bytes stay.
  const later = peerBatch(600);
  const first = copyInto(onGpu1, buffers);
  const second = copyInto(later, buffers, { useBackgroundThread: false });
  await second;
  await first;
  first.dispose();
  second.dispose();
  for (const key of keys) assertEquals(bytesOf(buffers[key]!.toHost()), bytesOf(later[key]!), key);
  disposeAll([onGpu0, onGpu1, buffers]);
});

/** The child's copies, and its trace lines (MTC_TRACE=1), with or without peer access. */
async function child(noPeer: boolean): Promise<{ result: { into: Record<string, number>; startCopy: number }; notes: string[] }> {
  const file = new URL("./fixtures/peer_child.ts", import.meta.url).pathname;
  const run = await runScript(file, [], { MTC_TRACE: "1", FAKE_CUDA_NO_PEER: noPeer ? "1" : "0", FAKE_CUDA_DEVICE_COUNT: "2" });
  assertSame(run.code, 0, `child: ${run.stderr.split("\n").filter((l) => !l.startsWith("mtc trace:")).join("\n")}`);
  const notes = run.stderr.split("\n").filter((l) => / note {2}/.test(l));
  return { result: JSON.parse(run.stdout.trim().split("\n").pop()!), notes };
}

/** Each child runs once; the copies and the notes are tests of their own. */
const children = new Map<boolean, ReturnType<typeof child>>();
function childOnce(noPeer: boolean): ReturnType<typeof child> {
  if (!children.has(noPeer)) children.set(noPeer, child(noPeer));
  return children.get(noPeer)!;
}

/** The notes name the gather launches: only where libmtc has its kernels. */
const noteTest = (name: string, fn: () => Promise<void>) =>
  test(`copyInto between GPUs: ${name}`, fn, { skip: skip ?? (hasKernels() ? undefined : "this libmtc has no kernels: mtc_has_kernels() is 0"), timeout: 60_000 });

peerTest("with peer access (a child process): the gathers, byte-exact", async () => {
  const { result } = await childOnce(false);
  for (const kind of DESTINATION_KINDS) assertSame(result.into[kind], expected(kind !== "dlpack"), kind);
  assertSame(result.startCopy, expected(true), "startCopy cuda:1 → cuda:0");
});

noteTest("with peer access (a child process): MTC_TRACE says which path each copy took", async () => {
  const { notes } = await childOnce(false);
  assert(notes.some((l) => /cuda:1 -> cuda:0: \d+ packed leaves by one gather launch on cuda:1/.test(l)), `a gather note:\n${notes.join("\n")}`);
  assert(notes.some((l) => /one copy each: leaf \d+'s destination is not known to be a block of libmtc's/.test(l)), `the DLPack copy's note:\n${notes.join("\n")}`);
});

peerTest("without peer access (FAKE_CUDA_NO_PEER=1, a child process): a peer copy a leaf, byte-exact", async () => {
  const { result } = await childOnce(true);
  for (const kind of DESTINATION_KINDS) assertSame(result.into[kind], expected(false), kind);
  assertSame(result.startCopy, expected(false), "startCopy cuda:1 → cuda:0");
});

noteTest("without peer access (FAKE_CUDA_NO_PEER=1, a child process): MTC_TRACE says why", async () => {
  const { notes } = await childOnce(true);
  assert(notes.some((l) => /one copy each: cuda:1 has no peer access to cuda:0/.test(l)), `copyInto's note:\n${notes.join("\n")}`);
  assert(notes.some((l) => /one copy each: no peer access from the source to the target/.test(l)), `startCopy's note:\n${notes.join("\n")}`);
});
