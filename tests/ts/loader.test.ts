// startLoader through the emulated driver: batches made and copied by
// workers, taken in order on this thread, byte for byte; back-pressure;
// errors from a producer and from a copy; abort, break, await using and
// close; after each, the pool counters and the parcels in transit back
// where they were. And a child process that exits, or ends its loop, while
// the workers still copy. Few workers where their number does not matter:
// `deno test` type-checks each worker's modules as it starts (about 1 s).
import { DeviceTensor, disposeAll, type Loader, type LoaderOptions, MtcError, startLoader } from "../../ts/mod.ts";
import { hasOwners } from "../../ts/ffi/owner.ts";
import { forEachLeaf } from "../../examples/example_batch.ts";
import { fakeDriver, skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertRejects, assertSame, assertThrows, note, runner, test } from "./harness.ts";
import { checkBatch, Tally } from "./fixtures/checks.ts";
import { assertBack, mark } from "./fixtures/loader_checks.ts";
import { type PatternedBatch, patternedBatch } from "./fixtures/loader_batches.ts";
import { runScript } from "./fixtures/spawn.ts";
import { toHost } from "./fixtures/threads.ts";

const PRODUCERS = new URL("./fixtures/loader_batches.ts", import.meta.url);
const tally = new Tally("loader");
const skip = skipWithoutDriver ??
  (fakeDriver() === null ? "needs libfakecuda's hooks (copy delay)" : undefined) ??
  (!hasOwners() ? "this libmtc has no owners (mtc/owner.h): results cannot move between threads" : undefined);
if (skip !== undefined) note(`loader tests skipped: ${skip}`);

function loaderOf<T = PatternedBatch & { worker: number }>(producer: string, options: Partial<LoaderOptions> = {}): Loader<T> {
  return startLoader<T>({ module: PRODUCERS, export: producer, device: "cuda:0", ...options });
}

/** Checks batch `index` as the loader handed it out: every leaf on cuda:0, every byte as made. */
function checkPatterned(batch: PatternedBatch, index: number): void {
  assertSame(batch.index, index, "batches come in index order");
  forEachLeaf(batch, (leaf, path) => assert(leaf instanceof DeviceTensor && leaf.device === "cuda:0", `${path} is on cuda:0`));
  checkBatch(toHost(batch), patternedBatch(index), tally, `batch ${index}`);
  tally.copies++;
}

test("loader: 4 workers, 40 batches, handed out in index order, each from worker i % 4, byte for byte", async () => {
  const m = mark();
  const loader = loaderOf("ordered", { workers: 4, depth: 2, batches: 40 });
  let index = 0;
  for await (const batch of loader) {
    checkPatterned(batch, index);
    assertSame(batch.worker, index % 4, `batch ${index}'s worker`);
    disposeAll(batch);
    index++;
  }
  assertSame(index, 40);
  assertSame((await loader.next()).done, true, "done after the stream ended");
  await loader.close();
  await assertBack(m, "40 batches");
  tally.cases++;
}, { skip });

test("loader: a producer that returns undefined ends the stream before that batch", async () => {
  const m = mark();
  const loader = loaderOf("ordered", { workers: 2, depth: 3, args: { end: 13 } });
  let index = 0;
  for await (const batch of loader) {
    checkPatterned(batch, index++);
    disposeAll(batch);
  }
  assertSame(index, 13);
  await loader.close();
  await assertBack(m, "ended by the producer");
  tally.cases++;
}, { skip });

test("loader: back-pressure: the producers never run more than workers * depth ahead of the consumer", async () => {
  const m = mark();
  const calls = new Int32Array(new SharedArrayBuffer(4));
  const [workers, depth, batches] = [2, 3, 30];
  const loader = loaderOf<{ index: number; values: DeviceTensor }>("counting", { workers, depth, batches, args: { calls: calls.buffer } });
  let most = 0;
  for (let taken = 0; taken < batches; taken++) {
    // Credits come back only as next() hands batches out: until the next one, producers may be called this often.
    most = Math.max(most, Atomics.load(calls, 0) - taken);
    assert(most <= workers * depth, `producers were called ${most} times ahead of the consumer (at most ${workers * depth})`);
    const { value } = await loader.next();
    assertSame(value!.index, taken);
    disposeAll(value);
    await tick(taken % 3 === 0 ? 20 : 1); // a slow consumer: the workers fill up to their credits
  }
  assertSame((await loader.next()).done, true);
  await loader.close();
  assertSame(Atomics.load(calls, 0), batches, "one producer call per batch");
  assertSame(most, workers * depth, "the workers reached their credits while the consumer was slow");
  await assertBack(m, "back-pressure");
  note(`loader (${runner}): ${workers} workers of depth ${depth}: at most ${most} batches made ahead of the consumer`);
  tally.cases++;
}, { skip });

test("loader: a producer's error comes at its batch's turn, with the worker's stack, then the loader is closed", async () => {
  const m = mark();
  const loader = loaderOf<{ index: number }>("failing", { workers: 2, args: { failAt: 5 } });
  const taken: number[] = [];
  const e = await assertRejects(async () => {
    for await (const batch of loader) {
      taken.push(batch.index);
      disposeAll(batch);
    }
  }, Error, "no batch 5: the source is broken");
  assertSame(taken.join(","), "0,1,2,3,4", "the batches before it first");
  assertSame(e.name, "TypeError");
  assert(e.stack!.includes("readSource") && e.stack!.includes("loader_batches.ts"), `the producer's frames: ${e.stack}`);
  assert(e.stack!.includes("at batch 5 in loader worker 1"), `which worker: ${e.stack}`);
  assertSame((await loader.next()).done, true, "closed after the error");
  await loader.close();
  await assertBack(m, "a producer's error");
  tally.cases++;
}, { skip });

test("loader: a copy's MtcError keeps its code and the leaf's path", async () => {
  const m = mark();
  const loader = loaderOf<{ index: number }>("badLeaf", { workers: 2, args: { badAt: 3 } });
  let taken = 0;
  const e = await assertRejects(async () => {
    for await (const batch of loader) {
      assertSame(batch.index, taken++);
      disposeAll(batch);
    }
  }, MtcError, "the Tensor's shape [2, \"3\"] is not an array of integers >= 0");
  assertSame(taken, 3);
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  assertSame(e.path, ".cam.t");
  assert(e.message.startsWith(".cam.t: "), e.message);
  assert(e.stack!.includes("at batch 3 in loader worker 1"), e.stack);
  await loader.close();
  await assertBack(m, "a copy's error");
  tally.cases++;
}, { skip });

test("loader: a module or export that is not there is an MtcError from the first next()", async () => {
  const missing = startLoader({ module: new URL("./fixtures/no_such_producer.ts", import.meta.url), device: "cuda:0", workers: 1 });
  await assertRejects(() => missing.next(), MtcError, "startLoader: cannot import");
  // Its error arrived, and is no batch made.
  assertSame(missing.stats.made, 0, "a module that failed to import made nothing");
  assertSame(missing.stats.workers[0]!.made, 0);
  await missing.close();
  const unnamed = loaderOf("noSuchExport", { workers: 1 });
  const e = await assertRejects(() => unnamed.next(), MtcError, 'has no function export "noSuchExport"');
  assert(e.message.includes("ordered") && e.message.includes("slow"), e.message);
  assertSame(unnamed.stats.made, 0, "an export that is not there made nothing");
  await unnamed.close();
  tally.cases++;
}, { skip });

test("loader: bad options throw MtcError at once", () => {
  const bad: [unknown, string][] = [
    [{ device: "cuda:0" }, "module must be an absolute URL"],
    [{ module: "./relative.ts", device: "cuda:0" }, "module must be an absolute URL"],
    [{ module: PRODUCERS, device: "gpu" }, 'invalid device "gpu"'],
    [{ module: PRODUCERS, device: "cuda:0", workers: 0 }, "workers = 0 must be an integer >= 1"],
    [{ module: PRODUCERS, device: "cuda:0", depth: 1.5 }, "depth = 1.5 must be an integer >= 1"],
    [{ module: PRODUCERS, device: "cuda:0", batches: -1 }, "batches = -1 must be an integer >= 0"],
    [{ module: PRODUCERS, device: "cuda:0", worker: 2 }, 'unknown option "worker"'],
    [{ module: PRODUCERS, device: "cuda:0", copyOptions: { pinned: true } }, 'copyOptions: unknown option "pinned"'],
    [{ module: PRODUCERS, device: "cuda:0", signal: {} }, "signal must be an AbortSignal"],
    [{ module: PRODUCERS, device: "cuda:0", args: () => 1 }, "cannot send the options to a worker"],
  ];
  for (const [options, message] of bad) assertThrows(() => startLoader(options as LoaderOptions), MtcError, message);
}, { skip });

test("loader: its options and copyOptions are read once: what is checked is what the workers use", async () => {
  const m = mark();
  const reads: Record<string, number> = {};
  const counting = <O extends object>(target: O): O =>
    new Proxy(target, {
      get(t, key, receiver) {
        if (typeof key === "string") reads[key] = (reads[key] ?? 0) + 1;
        return Reflect.get(t, key, receiver);
      },
    });
  const copyOptions = counting({ packThresholdBytes: 1024 });
  const loader = startLoader<PatternedBatch>(counting({ module: PRODUCERS, export: "ordered", device: "cuda:0", workers: 2, batches: 4, copyOptions }));
  let index = 0;
  for await (const batch of loader) {
    checkPatterned(batch, index++);
    disposeAll(batch);
  }
  assertSame(index, 4);
  await loader.close();
  for (const key of ["module", "device", "workers", "copyOptions", "packThresholdBytes"]) assertSame(reads[key], 1, `${key} read ${reads[key]} times`);
  await assertBack(m, "read once");
  tally.cases++;
}, { skip });

test("loader: an abort rejects the waiting next() with the signal's reason, and releases what was in flight", async () => {
  const m = mark();
  await withCopyDelay(20_000, async () => {
    for (const reason of [new Error("stop loading"), undefined]) {
      const controller = new AbortController();
      // Batch 3 never comes; worker 0 goes on with 4 and 6, each copy 20 ms.
      const loader = loaderOf<PatternedBatch>("slow", { workers: 2, depth: 2, signal: controller.signal, args: { ms: 60_000, only: 3 } });
      for (let i = 0; i < 3; i++) {
        const { value } = await loader.next();
        checkPatterned(value!, i);
        disposeAll(value);
      }
      const waiting = loader.next();
      setTimeout(() => controller.abort(reason), 10);
      const e = await assertRejects(() => waiting, Error);
      if (reason !== undefined) assertSame(e, reason);
      else assert(e instanceof DOMException && e.name === "AbortError", `an AbortError: ${e}`);
      assertSame((await loader.next()).done, true, "done after the abort");
      await loader.close();
    }
  });
  await assertBack(m, "aborted mid-stream");
  const early = new AbortController();
  early.abort(new Error("before the start"));
  const never = loaderOf("ordered", { signal: early.signal });
  await assertRejects(() => never.next(), Error, "before the start");
  await never.close();
  tally.cases++;
}, { skip });

test("loader: break out of for-await closes it; batches in messages and copies are released", async () => {
  const m = mark();
  await withCopyDelay(5_000, async () => {
    const loader = loaderOf("ordered", { workers: 2, depth: 3 });
    let index = 0;
    for await (const batch of loader) {
      checkPatterned(batch, index);
      disposeAll(batch);
      if (++index === 5) {
        await tick(30); // let the workers fill their credits: messages wait here, copies run there
        break;
      }
    }
    assertSame((await loader.next()).done, true);
  });
  await assertBack(m, "break");
  tally.cases++;
}, { skip });

test("loader: await using closes it at the end of the block", async () => {
  const m = mark();
  {
    await using loader = loaderOf("ordered", { workers: 1, batches: 100 });
    for (let i = 0; i < 3; i++) {
      const { value } = await loader.next();
      checkPatterned(value!, i);
      disposeAll(value);
    }
  }
  await assertBack(m, "await using");
  tally.cases++;
}, { skip });

test("loader: close() twice, with a next() waiting: both resolve, the next() is done, later ones too", async () => {
  const m = mark();
  const loader = loaderOf("slow", { workers: 1, args: { ms: 200 } });
  const waiting = loader.next();
  const [first, second] = [loader.close(), loader.close()];
  assertSame((await waiting).done, true, "the waiting next() ends");
  await Promise.all([first, second]);
  await loader.close();
  assertSame((await loader.next()).done, true);
  await assertBack(m, "close twice");
  tally.cases++;
}, { skip });

const EXIT_FIXTURE = new URL("./fixtures/loader_exit.ts", import.meta.url).pathname;
const EXITS: Record<string, string> = { exit: "exits with the loader open", end: "breaks out of its loop and ends" };

for (const [mode, does] of Object.entries(EXITS)) {
  test(`loader: a child process that ${does} while the workers copy exits cleanly`, async () => {
    const r = await runScript(EXIT_FIXTURE, [mode], { FAKE_CUDA_COPY_DELAY_US: "300000", FAKE_CUDA_QUIET: "", FAKE_CUDA_LOG: "" });
    const shown = `code ${r.code}, signal ${r.signal}, ${r.ms.toFixed(0)} ms\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
    assert(r.stdout.includes(`took batch 0 (${mode})`), `the child took its first batch: ${shown}`);
    assertSame(r.stdout.includes("the loop ended"), mode === "end", `how it left: ${shown}`);
    assertSame(r.signal, null, `no signal: ${shown}`);
    assertSame(r.code, 0, `exit code 0: ${shown}`);
    assertSame(r.stderr, "", `nothing on stderr: ${shown}`);
    assert(r.ms < 10_000, `no hang: ${shown}`);
    note(`loader (${runner}): child "${mode}" exited in ${r.ms.toFixed(0)} ms`);
    tally.cases++;
  }, { skip, timeout: 30_000 });
}

test("loader: totals", () => tally.print(runner), { skip });
