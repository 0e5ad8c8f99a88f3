// Memory a moved result must not lose: a DeviceTensor imported by
// fromDLPack (its memory is another library's) is refused, untouched; a
// pinned block that a copy still reads or writes is handed over only once
// that copy is over, so the receiver's writes reach no copy of the sender's
// and the receiver sees what a copy wrote. Emulated driver (a copy delay
// keeps the copies in flight).
import {
  copyInto,
  DeviceTensor,
  disposeAll,
  fromDLPack,
  MtcError,
  moveResult,
  pinnedArray,
  pinnedTensor,
  startCopy,
  takeResult,
  type Tensor,
  toDLPack,
} from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { pinnedBlockOf } from "../../ts/tensor/host_output.ts";
import { skipWithoutDriver, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const memoryTest = (name: string, fn: () => void | Promise<void>) => test(`move, memory: ${name}`, fn, { skip: skipWithoutDriver });

const parcels = () => library().symbols.mtc_parcels_live!();
/** True while a copy submitted so far reads or writes the pinned block under `view`. */
const busy = (view: ArrayBufferView) => library().symbols.mtc_block_busy!(pinnedBlockOf(view.buffer)!.block) !== 0;

memoryTest("a fromDLPack DeviceTensor is refused, naming it and what to do; it stays usable, and nothing else moved", async () => {
  const onGpu = await startCopy({ a: new Float32Array([1, 2, 3]), b: new Int32Array([4]) }, "cuda:0");
  const imported = fromDLPack(toDLPack(onGpu.a)) as DeviceTensor;
  const before = parcels();
  const e = assertThrows(() => moveResult({ keep: onGpu.b, deep: [{ imported }] }), MtcError, "imported by fromDLPack");
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  assertSame(e.path, ".deep[0].imported");
  assert(e.message.includes("copyInto(tensor, DeviceTensor.empty("), e.message);
  assertSame(parcels(), before, "no parcel made");
  assert(!imported.disposed && !onGpu.b.disposed, "nothing disposed: its deleter did not run");
  assertEquals(Array.from(imported.toHost() as Float32Array), [1, 2, 3]);
  // What the message says instead: a copy of it, into libmtc's memory, moves.
  const copy = DeviceTensor.empty(imported.shape, imported.dtype, imported.device);
  await copyInto(imported, copy);
  const got = takeResult(moveResult({ copy })) as { copy: DeviceTensor };
  assertEquals(Array.from(got.copy.toHost() as Float32Array), [1, 2, 3]);
  disposeAll([got, imported, onGpu]);
});

memoryTest("a pinned array read by a copy in flight: moveResult hands it over once the copy is over; the copy delivers the sender's bytes", async () => {
  for (const useBackgroundThread of [true, false]) {
    const { handle, got } = await withCopyDelay(100_000, () => {
      const p = pinnedArray("float32", 1024).fill(7);
      const t = pinnedTensor("int32", [4, 4]);
      (t.data as Int32Array).fill(3);
      const handle = startCopy({ p, t }, "cuda:0", { useBackgroundThread });
      const moved = moveResult({ p, t });
      assert(handle.ready(), `the copy is over when moveResult returns (background thread ${useBackgroundThread})`);
      const got = takeResult(moved) as { p: Float32Array; t: Tensor };
      assert(!busy(got.p) && !busy(got.t.data), "no copy uses the blocks the receiver got");
      got.p.fill(9); // the receiver's writes
      (got.t.data as Int32Array).fill(8);
      return { handle, got };
    });
    const onGpu = await handle;
    assert((onGpu.p.toHost() as Float32Array).every((v) => v === 7), "the copy read the sender's bytes");
    assert(((onGpu.t.toHost() as Tensor).data as Int32Array).every((v) => v === 3), "the copy read the sender's bytes");
    disposeAll([onGpu, got]);
  }
});

memoryTest("a pinned array a copy writes in flight (copyInto from the GPU): the receiver gets it once written", async () => {
  const onGpu = await startCopy(new Float64Array(4096).fill(5), "cuda:0");
  const destination = pinnedArray("float64", 4096).fill(0);
  await withCopyDelay(100_000, async () => {
    const handle = copyInto(onGpu, destination);
    assert(busy(destination), "the copy writes it");
    const got = takeResult(moveResult({ destination })) as { destination: Float64Array };
    assert(!busy(got.destination), "no copy writes it once it is the receiver's");
    assert(got.destination.every((v) => v === 5), "the bytes the copy wrote");
    // The sender's destination was handed over (detached) before it awaited the copy: its handle
    // may say so; either way it settles, and the bytes are the receiver's.
    const settled = await handle.then(() => "done", (e) => (e instanceof MtcError ? e.code : e));
    assert(settled === "done" || settled === "MTC_ERR_INVALID_STATE", String(settled));
    disposeAll([got, onGpu]);
  });
});
