// Prepared copies moved while they run: one parcel a message (the plan and
// the pinned blocks it reads), the layout once; the receiver waits for the
// copy; the sender terminated during it; edited, replayed and stale
// messages. Emulated driver.
import { DeviceTensor, disposeMoved, dropMoved, type Moved, moveResult, MtcError, ownerAlive, prepareCopy, Status, takeResult, Tensor } from "../../ts/mod.ts";
import { takeWaits } from "../../ts/thread/parcel_take.ts";
import { fakeDriver, skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { expectCountersBack, settledCounters, toHost, until } from "./fixtures/threads.ts";

const parcelTest = (name: string, fn: () => void | Promise<void>) => test(`parcel: ${name}`, fn, { skip: skipWithoutDriver });

const WORKER = new URL("./fixtures/parcel_worker.ts", import.meta.url).href;

interface Reply {
  owner: number;
  moved: Moved;
}

function spawn(): { worker: Worker; ask(command: object): Promise<Reply> } {
  const worker = new Worker(WORKER, { type: "module" });
  return {
    worker,
    ask: (command) =>
      new Promise((resolve, reject) => {
        worker.onmessage = (e: MessageEvent<Reply>) => resolve(e.data);
        worker.onerror = (e) => reject(new Error(String((e as ErrorEvent).message)));
        worker.postMessage(command);
      }),
  };
}

/** Batch `seed` as parcel_worker.ts makes it, read back to the host. */
function expected(seed: number): unknown {
  return {
    name: `batch ${seed}`,
    seed,
    ids: new Int32Array(300).fill(seed),
    cams: [
      { boxes: new Tensor(new Float32Array(24).fill(seed + 0.5), [4, 6], "float32"), depth: new Float64Array(500).fill(seed) },
      { boxes: new Tensor(new Float32Array(24).fill(-seed), [4, 6], "float32"), depth: null },
    ],
    extra: new Map<unknown, unknown>([["empty", new Uint8Array(0)], [7, new Int16Array(3).fill(seed)]]),
  };
}

function readBack(batch: unknown): unknown {
  const host = toHost(batch) as Record<string, unknown>;
  // toHost gives Tensors for tensors: compare their data, shape and dtype.
  return JSON.parse(JSON.stringify(host, (_, v) => (v instanceof Tensor ? { data: Array.from(v.data as Float32Array), shape: v.shape, dtype: v.dtype } : ArrayBuffer.isView(v) ? Array.from(v as Int32Array) : v instanceof Map ? [...v] : v)));
}

function same(batch: unknown, seed: number): void {
  assertEquals(readBack(batch), readBack(expected(seed)), `batch ${seed} read back`);
}

parcelTest("a prepared layout's parcels: the layout comes once, no row per leaf; each result exact, disposed per block", async () => {
  const before = await settledCounters();
  const { worker, ask } = spawn();
  const messages: Moved[] = [];
  for (let seed = 1; seed <= 4; seed++) messages.push((await ask({ op: "copy", seed })).moved);
  assert(messages[0]!.shape !== undefined, "the first message brings its layout");
  for (const m of messages.slice(1)) {
    assertSame(m.shape, undefined, "later messages bring none");
    assertSame(m.layout, messages[0]!.layout, "and name the first one's");
    assertSame(m.nums, undefined, "no row per leaf");
    assertSame(m.template, undefined, "no template");
  }
  assertSame(messages[0]!.layout, messages[0]!.parcel, "a layout's id is the id C gave its first parcel");
  for (const [i, m] of messages.entries()) {
    const batch = takeResult(m) as Record<string, unknown>;
    assert(batch.ids instanceof DeviceTensor, "a DeviceTensor");
    same(batch, i + 1);
    disposeMoved(batch);
    assert((batch.ids as DeviceTensor).disposed && ((batch.cams as { boxes: DeviceTensor }[])[1]!.boxes).disposed, "every leaf disposed with its group");
    disposeMoved(batch); // idempotent
  }
  const { owner } = await ask({ op: "ownerOnly" });
  worker.terminate();
  await until(() => !ownerAlive(owner));
  await expectCountersBack(before, "blocks, plans and parcels back");
});

parcelTest("pageable leaves too: moved once staged, exact on the receiver", async () => {
  const before = await settledCounters();
  const { worker, ask } = spawn();
  for (let seed = 1; seed <= 3; seed++) {
    const batch = takeResult((await ask({ op: "copy", seed, pageable: true })).moved);
    same(batch, seed);
    disposeMoved(batch);
  }
  const { owner } = await ask({ op: "ownerOnly" });
  worker.terminate();
  await until(() => !ownerAlive(owner));
  await expectCountersBack(before, "everything back");
});

parcelTest("a handle moved before its copy is over: the take on another thread waits for it", async () => {
  const fake = fakeDriver();
  if (fake === null) return;
  const before = await settledCounters();
  const { worker, ask } = spawn();
  takeResult((await ask({ op: "copy", seed: 1 })).moved); // the layout; dropped below with the group
  fake.setCopyDelayUs(300_000);
  let moved: Moved;
  const waited = takeWaits.count;
  try {
    moved = (await ask({ op: "copy", seed: 2 })).moved;
    const began = performance.now();
    const batch = takeResult(moved);
    const took = performance.now() - began;
    assert(takeWaits.count === waited + 1, "the take waited for the copy");
    assert(took > 50, `the take waited for the copy (${took.toFixed(1)} ms)`);
    same(batch, 2);
    disposeMoved(batch);
  } finally {
    fake.setCopyDelayUs(0);
  }
  const { owner } = await ask({ op: "ownerOnly" });
  worker.terminate();
  await until(() => !ownerAlive(owner));
  await expectCountersBack(before, "everything back");
});

parcelTest("the sender terminated while its copy reads its arena: the copy completes, the receiver's bytes are exact", async () => {
  const fake = fakeDriver();
  if (fake === null) return;
  const before = await settledCounters();
  const { worker, ask } = spawn();
  const first = (await ask({ op: "copy", seed: 1 })).moved;
  fake.setCopyDelayUs(300_000);
  try {
    const { owner, moved } = await ask({ op: "copy", seed: 2 });
    worker.terminate(); // its arena's block: the parcel holds it until the copy is over
    await until(() => !ownerAlive(owner));
    assert(!ownerAlive(owner), "the sender's thread ended");
    disposeMoved(takeResult(first));
    const waits = takeWaits.count;
    const batch = takeResult(moved);
    assertSame(takeWaits.count, waits + 1, "the copy was still running when its sender ended");
    same(batch, 2);
    disposeMoved(batch);
  } finally {
    fake.setCopyDelayUs(0);
  }
  await expectCountersBack(before, "the arena, the plan and the result back");
});

parcelTest("edited, replayed, stale and forged parcels are refused; the message as sent still takes", async () => {
  const before = await settledCounters();
  const { worker, ask } = spawn();
  const first = (await ask({ op: "copy", seed: 1 })).moved;
  const second = (await ask({ op: "copy", seed: 2 })).moved;
  // Not taken yet: the second names a layout this thread has not received.
  assertSame(assertThrows(() => takeResult(second), MtcError, "has not taken").status, Status.MTC_ERR_INVALID_STATE);
  const one = takeResult(first);
  assertThrows(() => takeResult(first), MtcError, "taken already"); // replayed
  assertSame(assertThrows(() => takeResult({ ...second, layout: 12345 }), MtcError, "has not taken").status, Status.MTC_ERR_INVALID_STATE);
  assertSame(assertThrows(() => takeResult({ ...second, layout: -1 }), MtcError, "layout id").status, Status.MTC_ERR_INVALID_ARGUMENT);
  assertSame(assertThrows(() => takeResult({ ...second, data: second.data!.slice(1) }), MtcError, "values").status, Status.MTC_ERR_INVALID_ARGUMENT);
  assertSame(assertThrows(() => takeResult({ ...second, parcel: 77 }), MtcError, "unknown here").status, Status.MTC_ERR_INVALID_STATE);
  assertThrows(() => takeResult({ ...second, shape: first.shape }), MtcError, "not its parcel's id");
  assertThrows(() => takeResult({ ...second, layout: second.parcel, shape: { ...first.shape!, rows: new Float64Array(3) } }), MtcError, "numbers of rows");
  const two = takeResult(second); // as sent
  same(two, 2);
  disposeMoved(one);
  disposeMoved(two);
  // A layout forged for a parcel, its leaves larger than the blocks the copy made: refused, naming a leaf; the parcel is given back.
  const third = (await ask({ op: "copy", seed: 3 })).moved;
  const big = { ...first.shape!, dims: first.shape!.dims.map((n) => n * 1000) as Float64Array };
  const forged = assertThrows(() => takeResult({ ...third, layout: third.parcel, shape: big }), MtcError, "reach byte");
  assertSame(forged.status, Status.MTC_ERR_INVALID_ARGUMENT);
  assert(forged.path !== undefined && forged.path !== "", `the error names a leaf (${forged.path})`);
  assertThrows(() => takeResult(third), MtcError, "taken already");
  const fourth = (await ask({ op: "copy", seed: 4 })).moved;
  dropMoved(fourth); // never taken
  assertThrows(() => takeResult(fourth), MtcError, "taken already"); // stale
  const { owner } = await ask({ op: "ownerOnly" });
  worker.terminate();
  await until(() => !ownerAlive(owner));
  await expectCountersBack(before, "everything back");
});

parcelTest("a layout's first message dropped: a later one says the layout travelled in it, and drops; a second drop is harmless", async () => {
  const before = await settledCounters();
  const { worker, ask } = spawn();
  const first = (await ask({ op: "copy", seed: 1 })).moved;
  const second = (await ask({ op: "copy", seed: 2 })).moved;
  dropMoved(first);
  dropMoved(first);
  const e = assertThrows(() => takeResult(second), MtcError, "has not taken");
  assertSame(e.status, Status.MTC_ERR_INVALID_STATE);
  assert(/travels in the first message/.test(e.message) && /dropped \(dropMoved\) or lost/.test(e.message) && /drop them too/.test(e.message), e.message);
  dropMoved(second);
  const { owner } = await ask({ op: "ownerOnly" });
  worker.terminate();
  await until(() => !ownerAlive(owner));
  await expectCountersBack(before, "everything back");
});

parcelTest("a layout message whose field is a getter that throws: an MtcError saying it could not be read, nothing taken", async () => {
  const before = await settledCounters();
  const { worker, ask } = spawn();
  const first = (await ask({ op: "copy", seed: 1 })).moved;
  for (const field of ["shape", "data", "layout", "parcel", "mtc"]) {
    const edited = Object.defineProperty({ ...first }, field, { get: () => { throw new RangeError(`no ${field}`); } }) as Moved;
    const e = assertThrows(() => takeResult(edited), MtcError, "the message could not be read");
    assertSame(e.status, Status.MTC_ERR_INVALID_ARGUMENT, e.message);
    assert(e.message.includes(`RangeError: no ${field}`), e.message);
  }
  // Inside the layout: a getter on one of its fields.
  const shape = Object.defineProperty({ ...first.shape! }, "rows", { get: () => { throw new RangeError("no rows"); } });
  assertThrows(() => takeResult({ ...first, shape } as Moved), MtcError, "RangeError: no rows");
  const one = takeResult(first); // nothing was taken: the message as sent takes
  same(one, 1);
  disposeMoved(one);
  const { owner } = await ask({ op: "ownerOnly" });
  worker.terminate();
  await until(() => !ownerAlive(owner));
  await expectCountersBack(before, "everything back");
});

parcelTest("a layout in use stays, however many others come and go (the least recently used are forgotten)", async () => {
  const before = await settledCounters();
  const sample = { a: new Float32Array(8).fill(1) };
  const kept = prepareCopy(sample, "cuda:0");
  const take = (value: Moved) => {
    const result = takeResult(value) as { a?: DeviceTensor; b?: DeviceTensor };
    const first = (result.a ?? result.b)!.toHost() as Float32Array;
    disposeMoved(result);
    return first[0];
  };
  assertSame(take(moveResult(kept.start(sample))), 1);
  // More layouts than the receiver keeps (256), taken one after the other; the kept one is used now and then.
  for (let i = 0; i < 300; i++) {
    const other = { b: new Float32Array(4 + i).fill(2) };
    const once = prepareCopy(other, "cuda:0");
    assertSame(take(moveResult(once.start(other))), 2);
    once.dispose();
    if (i % 100 === 99) assertSame(take(moveResult(kept.start(sample))), 1, `after ${i + 1} other layouts`);
  }
  kept.dispose();
  await expectCountersBack(before, "every plan and block given back");
});
