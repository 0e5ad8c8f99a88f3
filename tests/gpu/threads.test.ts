// Workers copying at once on the real GPU, their results moved to the main
// thread and used there, and a worker terminated with DMAs in flight: C
// gives back what its thread owned; a message edited on its way is refused
// and the message as sent is exact; a pinned array moved while a DMA reads
// it (tests/ts/move*.test.ts have the rest).
import { disposeAll, dropMovedFrom, type Moved, moveResult, MtcError, ownerAlive, pinnedArray, startCopy, takeResult } from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { F, FIELDS } from "../../ts/thread/message.ts";
import { counters, expectCountersBack, settledCounters, spawnMoveWorker as spawn, until } from "../ts/fixtures/threads.ts";
import { assert, assertSame } from "../ts/harness.ts";
import { checkBatch } from "../ts/fixtures/move_batch.ts";
import { gpuTest } from "./gpu_env.ts";

gpuTest("threads: four workers copy at once; 200 results moved to the main thread are exact there", async () => {
  const before = await settledCounters();
  const workers = [spawn(), spawn(), spawn(), spawn()];
  let wrong = 0;
  for (let round = 0; round < 50; round++) {
    const replies = await Promise.all(workers.map((w, k) => w.ask({ op: "copy", seed: round * 4 + k })));
    for (const [k, reply] of replies.entries()) {
      const batch = takeResult(reply.moved!);
      wrong += await checkBatch(batch, round * 4 + k); // copied back from the GPU, byte by byte
      disposeAll(batch);
    }
  }
  assertSame(wrong, 0, "leaves that differ");
  const owners = await Promise.all(workers.map((w) => w.ask({ op: "ownerOnly" })));
  for (const w of workers) w.worker.terminate();
  await until(() => owners.every((o) => !ownerAlive(o.owner)));
  await expectCountersBack(before, "blocks, plans and parcels back");
});

gpuTest("threads: a worker terminated with 24 copies of 4 MiB in flight; what its thread owned comes back", async () => {
  for (let round = 0; round < 3; round++) {
    const before = await settledCounters();
    const w = spawn();
    const reply = await w.ask({ op: "inflight", count: 24 });
    assert(counters().blocks > before.blocks, "the worker holds blocks");
    w.worker.terminate();
    await until(() => !ownerAlive(reply.owner));
    assert(!ownerAlive(reply.owner), "its owner ended with its thread");
    await expectCountersBack(before, `round ${round}: plans, blocks and pinned memory back`);
  }
});

gpuTest("threads: a result outlives the worker that moved it", async () => {
  const w = spawn();
  const reply = await w.ask({ op: "copy", seed: 77 });
  w.worker.terminate();
  await until(() => !ownerAlive(reply.owner));
  const batch = takeResult(reply.moved!);
  assertSame(await checkBatch(batch, 77), 0);
  disposeAll(batch);
});

gpuTest("threads: moved twice, used by the sender after the move, never taken: exact, clear errors, nothing left", async () => {
  const before = await settledCounters();
  const w = spawn();
  const first = await w.ask({ op: "copy", seed: 31 });
  const batch = takeResult(first.moved!) as { f32: { disposed: boolean; address: number } };
  const again = moveResult(batch); // main → worker → main
  assert(batch.f32.disposed, "the sender's tensors are disposed");
  let error: unknown;
  try {
    void batch.f32.address;
  } catch (e) {
    error = e;
  }
  assert(error instanceof MtcError && error.code === "MTC_ERR_INVALID_STATE", `a use after the move is an MtcError: ${error}`);
  const reply = await w.ask({ op: "take", seed: 31, moved: again });
  assertSame(reply.wrong, 0, "exact in the worker");
  const back = takeResult(reply.moved!);
  assertSame(await checkBatch(back, 31), 0, "exact back on the main thread");
  disposeAll(back);
  const lost = await w.ask({ op: "copy", seed: 32 }); // never taken
  w.worker.terminate();
  await until(() => !ownerAlive(lost.owner));
  assertSame(dropMovedFrom(lost.owner), 1, "the untaken parcel dropped by its sender");
  await expectCountersBack(before, "nothing left");
});

gpuTest("threads: a worker's message edited on its way (offsets, shapes) is refused, nothing taken; the message as sent is exact", async () => {
  const w = spawn();
  const reply = await w.ask({ op: "copy", seed: 41 });
  const moved = reply.moved!;
  const parcels = library().symbols.mtc_parcels_live!();
  const edit = (at: number, value: number, field: "nums" | "dims" = "nums") => {
    const copy = structuredClone(moved) as Moved & { nums: Float64Array; dims: Float64Array };
    copy[field][at] = value;
    return copy;
  };
  for (const bad of [edit(F.offset, 2 ** 40), edit(F.offset, 1), edit(0, 2 ** 31, "dims"), edit(FIELDS + F.block, 1000)]) {
    let error: unknown;
    try {
      takeResult(bad);
    } catch (e) {
      error = e;
    }
    assert(error instanceof MtcError && error.code === "MTC_ERR_INVALID_ARGUMENT", `refused: ${error}`);
    assertSame(library().symbols.mtc_parcels_live!(), parcels, "nothing taken");
  }
  const batch = takeResult(moved);
  assertSame(await checkBatch(batch, 41), 0);
  disposeAll(batch);
  w.worker.terminate();
});

gpuTest("threads: a 64 MiB pinned array moved while a DMA reads it: handed over once the DMA is over; the copy has the sender's bytes", async () => {
  const p = pinnedArray("uint8", 64 << 20).fill(7);
  const handle = startCopy({ p }, "cuda:0");
  const got = takeResult(moveResult({ p })) as { p: Uint8Array };
  assert(handle.ready(), "the copy is over when moveResult returns");
  got.p.fill(9);
  const onGpu = await handle;
  const back = onGpu.p.toHost() as Uint8Array;
  assert(back.every((v) => v === 7), "the DMA read the sender's bytes, not the receiver's");
  disposeAll([onGpu, got]);
});
