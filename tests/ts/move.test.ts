// Results moved between threads: workers copy at once and move their
// results to the main thread, which uses them; moved twice, used after the
// move, never taken, a worker terminated with copies in flight, errors.
// Emulated driver.
import {
  DeviceTensor,
  disposeAll,
  dropMoved,
  dropMovedFrom,
  isMoved,
  type Moved,
  MtcError,
  moveResult,
  ownerAlive,
  pinnedArray,
  pinnedTensor,
  releaseHostOutput,
  startCopy,
  Status,
  takeResult,
  Tensor,
  threadOwner,
} from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { DTYPES, type TypedArray, valuesPerElement } from "../../ts/tensor/dtype.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { checkBatch, makeBatch } from "./fixtures/move_batch.ts";
import { counters, expectCountersBack, settledCounters, spawnMoveWorker as spawn, until } from "./fixtures/threads.ts";

const moveTest = (name: string, fn: () => void | Promise<void>) => test(`move: ${name}`, fn, { skip: skipWithoutDriver });
/** Waits until the counters are back at `before` exactly (workers end on their own time), and asserts it. */
async function settled(before: ReturnType<typeof counters>, what: string): Promise<void> {
  await expectCountersBack(before, what);
}

async function ended(owner: number): Promise<void> {
  await until(() => !ownerAlive(owner));
  assert(!ownerAlive(owner), `the worker's owner ${owner} ended with its thread`);
}

moveTest("four workers copy at once; each result, moved to the main thread, is exact there", async () => {
  const before = await settledCounters();
  const workers = [spawn(), spawn(), spawn(), spawn()];
  let wrong = 0;
  for (let round = 0; round < 5; round++) {
    const replies = await Promise.all(workers.map((w, k) => w.ask({ op: "copy", seed: round * 4 + k })));
    for (const [k, reply] of replies.entries()) {
      assert(isMoved(reply.moved), "a moved message");
      const batch = takeResult(reply.moved!) as Record<string, unknown>;
      assert(batch.f32 instanceof DeviceTensor, "a DeviceTensor on the main thread");
      wrong += await checkBatch(batch, round * 4 + k);
      disposeAll(batch);
    }
  }
  assertSame(wrong, 0, "leaves that differ");
  const owners = await Promise.all(workers.map((w) => w.ask({ op: "ownerOnly" })));
  for (const w of workers) w.worker.terminate();
  for (const o of owners) await ended(o.owner);
  await settled(before, "blocks, plans and parcels back");
});

moveTest("moved twice: main → worker → main, exact each time; the message is taken once", async () => {
  const before = await settledCounters();
  const w = spawn();
  const first = await w.ask({ op: "copy", seed: 11 });
  const batch = takeResult(first.moved!);
  assertThrows(() => takeResult(first.moved!), MtcError, "taken already");
  assertSame(await checkBatch(batch, 11), 0);
  const moved = moveResult(batch);
  assert((batch as { f32: DeviceTensor }).f32.disposed, "the sender's tensors are disposed after the move");
  const reply = await w.ask({ op: "take", seed: 11, moved });
  assertSame(reply.wrong, 0, "exact in the worker");
  const back = takeResult(reply.moved!);
  assertSame(await checkBatch(back, 11), 0, "exact back on the main thread");
  disposeAll(back);
  w.worker.terminate();
  await settled(before, "all given back");
});

moveTest("used by the sender after the move: a clear error, nothing freed twice", async () => {
  const before = await settledCounters();
  const onGpu = await startCopy({ a: new Float32Array([1, 2, 3]), t: new Tensor(new Int32Array(4), [2, 2]) }, "cuda:0");
  const moved = moveResult(onGpu);
  assert(onGpu.a.disposed && onGpu.t.disposed, "disposed");
  const e = assertThrows(() => onGpu.a.address, MtcError, "disposed");
  assertSame(e.status, Status.MTC_ERR_INVALID_STATE);
  const again = assertThrows(() => moveResult(onGpu), MtcError, "disposed");
  assertSame(again.path, ".a");
  onGpu.a.dispose(); // a no-op
  disposeAll(onGpu);
  const taken = takeResult(moved);
  assertEquals(Array.from(taken.a.toHost() as Float32Array), [1, 2, 3]);
  disposeAll(taken);
  // A handle moved: its later uses say it was moved, not that dispose() was called.
  const handle = startCopy({ b: new Float32Array([4]) }, "cuda:0");
  const movedHandle = moveResult(handle);
  for (const use of [() => handle.get(), () => handle.completionEvent()]) {
    const stale = assertThrows(use, MtcError, "was moved to another thread (moveResult disposed it here)");
    assertSame(stale.status, Status.MTC_ERR_INVALID_STATE);
  }
  disposeAll(takeResult(movedHandle));
  await settled(before, "given back once");
});

moveTest("never taken: dropMoved, and dropMovedFrom a terminated worker, give the parcels back", async () => {
  const before = await settledCounters();
  const w = spawn();
  const a = await w.ask({ op: "copy", seed: 3 });
  const b = await w.ask({ op: "copy", seed: 4 });
  const c = await w.ask({ op: "pinned", seed: 5 });
  w.worker.terminate();
  await ended(a.owner);
  assertSame(library().symbols.mtc_parcels_live!(), before.parcels + 3, "three parcels outlive their sender");
  dropMoved(a.moved!);
  dropMoved(a.moved!); // twice: nothing
  assertThrows(() => takeResult(a.moved!), MtcError, "dropped");
  assertSame(dropMovedFrom(a.owner), 2, "the two others");
  assertSame(dropMovedFrom(a.owner), 0);
  void b, c;
  await settled(before, "nothing left");
});

moveTest("a result survives its sender's terminate(), and is exact", async () => {
  const before = await settledCounters();
  const w = spawn();
  const reply = await w.ask({ op: "copy", seed: 21 });
  w.worker.terminate();
  await ended(reply.owner);
  const batch = takeResult(reply.moved!);
  assertSame(await checkBatch(batch, 21), 0);
  disposeAll(batch);
  await settled(before, "given back");
});

moveTest("a worker terminated with copies in flight and results held: C gives back what it owned", async () => {
  const before = await settledCounters();
  const w = spawn();
  const reply = await w.ask({ op: "inflight", count: 8 });
  assertSame(reply.started, 9);
  assert(counters().blocks > before.blocks, "the worker holds blocks");
  w.worker.terminate();
  await ended(reply.owner);
  await settled(before, "plans, blocks and pinned memory back to where they were");
});

moveTest("pinned host arrays and tensors, and pinned outputs of a copy to the host, move exact", async () => {
  const before = await settledCounters();
  const w = spawn();
  const p = await w.ask({ op: "pinned", seed: 9 });
  const got = takeResult(p.moved!) as { ids: Int32Array; t: Tensor };
  assert(got.ids instanceof Int32Array && got.ids.length === 100, "an Int32Array of 100");
  assertEquals(Array.from(got.ids.slice(0, 3)), [9, 10, 11]);
  assertEquals(got.t.shape, [2, 3]);
  assertEquals(Array.from(got.t.data as Float64Array), [9, 9, 9, 9, 9, 9]);
  const h = await w.ask({ op: "copyHost", seed: 13 });
  const host = takeResult(h.moved!);
  assertSame(await checkBatch(host, 13), 0, "host outputs exact");
  const device = takeResult(h.device!);
  assertSame(await checkBatch(device, 13), 0, "device outputs exact");
  disposeAll([got, host, device]);
  w.worker.terminate();
  await settled(before, "given back");
});

moveTest("an MtcError crosses threads with its status, code, leaf path and the worker's stack", async () => {
  const w = spawn();
  const reply = await w.ask({ op: "error" });
  const e = takeResult(reply.moved!) as unknown as MtcError;
  assert(e instanceof MtcError, "an MtcError");
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  assertSame(e.status, Status.MTC_ERR_INVALID_ARGUMENT);
  assertSame(e.path, ".samples[1].bad");
  assert(e.message.startsWith(".samples[1].bad: "), e.message);
  assert(String(e.stack).includes("move_worker.ts"), `the worker's stack: ${e.stack}`);
  const plain = takeResult(moveResult(new TypeError("nope")));
  assert(plain instanceof Error && plain.name === "TypeError" && plain.message === "nope", "a plain error too");
  w.worker.terminate();
});

moveTest("an arena's tensor cannot be moved; a message that is not ours is refused", async () => {
  const { Arena } = await import("../../ts/mod.ts");
  using arena = Arena.create(1 << 16);
  const x = arena.array("float32", 4);
  const e = assertThrows(() => moveResult({ deep: [x] }), MtcError, "arena");
  assertSame(e.path, ".deep[0]");
  assertThrows(() => takeResult({} as Moved), MtcError, "not a message of moveResult");
  assert(threadOwner() > 0, "the main thread has an owner");
  void makeBatch;
});

moveTest("a getter run by moveResult disposes or releases a leaf it read before: an MtcError naming it, nothing taken, nothing freed twice", async () => {
  const before = await settledCounters();
  const onGpu = await startCopy({ a: new Float32Array([1, 2]), b: new Int32Array([3]) }, "cuda:0");
  const pinned = pinnedArray("float64", 4).fill(7);
  const parcels = library().symbols.mtc_parcels_live!();
  // Keys are read in order: `late` runs after `a` and `p` were recorded.
  const value = {
    a: onGpu.a,
    p: pinned,
    get late() {
      onGpu.a.dispose();
      return 1;
    },
  };
  const e = assertThrows(() => moveResult(value), MtcError, "disposed while the value was read");
  assertSame(e.path, ".a");
  const released = {
    p: pinned,
    get late() {
      releaseHostOutput(pinned);
      return 1;
    },
  };
  const r = assertThrows(() => moveResult(released), MtcError, "released while the value was read");
  assertSame(r.path, ".p");
  assertSame(library().symbols.mtc_parcels_live!(), parcels, "no parcel made");
  assert(!onGpu.b.disposed, "what was not moved is untouched");
  disposeAll(onGpu);
  await settled(before, "given back once");
});

moveTest("takeResult and dropMoved read each field of a message once", async () => {
  const before = await settledCounters();
  const moved = moveResult(await startCopy({ x: new Uint8Array([5, 6]) }, "cuda:0"));
  const reads: Record<string, number> = {};
  const counted = new Proxy(moved, {
    get(target, key, receiver) {
      if (typeof key === "string") reads[key] = (reads[key] ?? 0) + 1;
      return Reflect.get(target, key, receiver);
    },
  });
  const got = takeResult(counted) as { x: DeviceTensor };
  assertEquals(Array.from(got.x.toHost() as Uint8Array), [5, 6]);
  assert(Object.entries(reads).every(([, n]) => n === 1), `each field once: ${JSON.stringify(reads)}`);
  dropMoved(counted); // taken already: nothing
  disposeAll(got);
  await settled(before, "given back");
});

moveTest("every dtype moves exact: pinned Tensors dense and strided, views at an offset, DeviceTensors", async () => {
  const before = counters();
  const bytesOf = (v: ArrayBufferView) => Array.from(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  for (const dtype of DTYPES) {
    const t = pinnedTensor(dtype, [3, 4]);
    const raw = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    raw.forEach((_, i) => (raw[i] = (i * 7 + 1) & 255));
    // A strided view of its columns 1 and 3, and the same storage at an offset (its second row on).
    const lanes = valuesPerElement(dtype);
    const strided = new Tensor(t.data, [3, 2], dtype, { strides: [4, 2], offset: 1 });
    const rows = new Tensor((t.data as Uint8Array).subarray(4 * lanes) as unknown as TypedArray, [2, 4], dtype);
    const onGpu = await startCopy({ d: new Tensor((t.data as Uint8Array).slice() as unknown as TypedArray, [3, 4], dtype) }, "cuda:0");
    const want = { t: bytesOf(t.data), strided: bytesOf(strided.data), rows: bytesOf(rows.data), d: bytesOf(t.data) };
    const got = takeResult(moveResult({ t, strided, rows, d: onGpu.d })) as { t: Tensor; strided: Tensor; rows: Tensor; d: DeviceTensor };
    assertEquals(bytesOf(got.t.data), want.t, `${dtype}: the tensor`);
    assertEquals([got.strided.strides, got.strided.offset, bytesOf(got.strided.data)], [[4, 2], 1, want.strided], `${dtype}: strided`);
    assertEquals([got.rows.shape, bytesOf(got.rows.data)], [[2, 4], want.rows], `${dtype}: at an offset`);
    assertEquals([got.d.dtype, bytesOf((got.d.toHost() as Tensor).data)], [dtype, want.d], `${dtype}: on the device`);
    disposeAll(got);
  }
  await settled(before, "given back");
});
