// startLoader's batches as parcels of a prepared layout (emulated driver):
// each exact and disposed per block; a copy still running when its batch is
// taken; a batch of another structure midway; the loader's stats.
import { DeviceTensor, disposeMoved, type Loader, type LoaderOptions, startLoader, Tensor } from "../../ts/mod.ts";
import { hasOwners } from "../../ts/ffi/owner.ts";
import { disposeGroupOf } from "../../ts/thread/parcel_take.ts";
import { fakeDriver, skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, note, test } from "./harness.ts";
import { assertBack, mark } from "./fixtures/loader_checks.ts";
import { expectedBatch } from "./fixtures/loader_parcels.ts";
import { runScript } from "./fixtures/spawn.ts";
import { toHost } from "./fixtures/threads.ts";

const PRODUCERS = new URL("./fixtures/loader_parcels.ts", import.meta.url);
const skip = skipWithoutDriver ??
  (fakeDriver() === null ? "needs libfakecuda's hooks (copy delay)" : undefined) ??
  (!hasOwners() ? "this libmtc has no owners (mtc/owner.h): results cannot move between threads" : undefined);
if (skip !== undefined) note(`loader parcel tests skipped: ${skip}`);

type Batch = Record<string, unknown>;

function loaderOf(producer: string, options: Partial<LoaderOptions> = {}): Loader<Batch> {
  return startLoader<Batch>({ module: PRODUCERS, export: producer, device: "cuda:0", ...options });
}

/** A batch as plain values: typed arrays as arrays, Tensors as { data, shape }. */
function plain(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_, v) => (v instanceof Tensor ? { data: Array.from(v.data as Float32Array), shape: v.shape } : ArrayBuffer.isView(v) ? Array.from(v as Int32Array) : v)));
}

function check(batch: Batch, index: number, more = false): void {
  assert(batch.ids instanceof DeviceTensor, `batch ${index}: its leaves are DeviceTensors`);
  assertEquals(plain(toHost(batch)), plain(expectedBatch(index, more)), `batch ${index} read back`);
}

test("loader parcels: batches of one structure come as parcels of one layout; each exact, disposed per block", async () => {
  const m = mark();
  const loader = loaderOf("arenaBatch", { workers: 2, batches: 16 });
  let index = 0;
  for await (const batch of loader) {
    check(batch, index);
    const leaf = batch.ids as DeviceTensor;
    assert(disposeGroupOf(batch), `batch ${index} came as a parcel of a prepared layout`);
    assert(leaf.disposed, "disposed with its group");
    disposeMoved(batch); // again: nothing more
    index++;
  }
  assertSame(index, 16);
  await loader.close();
  await assertBack(m, "16 batches");
}, { skip });

test("loader parcels: a copy still running when its batch is taken is waited for; the stats say so", async () => {
  const m = mark();
  await withCopyDelay(30_000, async () => {
    const loader = loaderOf("arenaBatch", { workers: 2, depth: 2, batches: 8 });
    let index = 0;
    for await (const batch of loader) {
      check(batch, index++);
      disposeMoved(batch);
    }
    const stats = loader.stats;
    assertSame(index, 8);
    assert(stats.copyWaitMs > 0 && stats.copyWaitMs <= stats.takeMs, `the takes waited for copies (${stats.copyWaitMs.toFixed(1)} of ${stats.takeMs.toFixed(1)} ms)`);
    await loader.close();
  });
  await assertBack(m, "8 batches, copies waited for");
}, { skip });

test("loader parcels: a batch of another structure midway is prepared anew; every batch exact", async () => {
  const m = mark();
  const loader = loaderOf("changing", { workers: 2, batches: 12, args: { at: 5 } });
  let index = 0;
  for await (const batch of loader) {
    check(batch, index, index >= 5);
    assert(disposeGroupOf(batch), `batch ${index}: a parcel`);
    index++;
  }
  assertSame(index, 12);
  await loader.close();
  await assertBack(m, "12 batches of two structures");
}, { skip });

test("loader parcels: stats: made, taken, in flight, waiting; each worker's make and copy time; the consumer's wait", async () => {
  const m = mark();
  const loader = loaderOf("arenaBatch", { workers: 2, depth: 3, batches: 20 });
  const first = await loader.next();
  disposeMoved(first.value);
  // Let the workers fill their depth.
  for (let i = 0; i < 200 && loader.stats.waiting < 6; i++) await tick(10);
  const full = loader.stats;
  assertSame(full.taken, 1);
  assertSame(full.waiting, 6, "each worker made depth batches ahead, and they wait");
  assertSame(full.made, 7);
  assertSame(full.inFlight, 0, "no worker may make more until one is taken");
  assert(full.consumerWaitMs > 0, "the first next() waited for its batch");
  for (const batch of [await loader.next(), await loader.next()]) disposeMoved(batch.value);
  let rest = 0;
  for await (const batch of loader) {
    disposeMoved(batch);
    rest++;
  }
  assertSame(rest, 17);
  const stats = loader.stats;
  assertSame(stats.made, 20);
  assertSame(stats.taken, 20);
  assertSame(stats.waiting, 0);
  assertSame(stats.inFlight, 0, "the stream ended: nothing in flight");
  assertSame(stats.workers.length, 2);
  for (const [w, worker] of stats.workers.entries()) {
    assertSame(worker.made, 10, `worker ${w} made its share`);
    assert(worker.makeMs > 0 && worker.copyMs > 0 && worker.moveMs > 0 && worker.postMs > 0, `worker ${w}: ${JSON.stringify(worker)}`);
    assert(worker.creditWaitMs > 0, `worker ${w} waited for credits while the consumer held back (${worker.creditWaitMs.toFixed(2)} ms)`);
  }
  assert(stats.takeMs > 0, "taking costs the consumer something");
  await loader.close();
  await assertBack(m, "20 batches");
}, { skip });

test("loader parcels: stats: inFlight is 0 once every batch of the stream was taken, after break, and after close()", async () => {
  const m = mark();
  const whole = loaderOf("arenaBatch", { workers: 2, depth: 3, batches: 4 });
  for (let i = 0; i < 4; i++) disposeMoved((await whole.next()).value);
  assertSame(whole.stats.taken, 4);
  assertSame(whole.stats.inFlight, 0, "all 4 taken, the stream not yet told it ended: nothing more can come");
  await whole.close();
  const broken = loaderOf("arenaBatch", { workers: 2, depth: 3 });
  for await (const batch of broken) {
    disposeMoved(batch);
    break;
  }
  assertSame(broken.stats.inFlight, 0, "after break");
  const closed = loaderOf("arenaBatch", { workers: 2, depth: 3, batches: 50 });
  disposeMoved((await closed.next()).value);
  await closed.close();
  assertSame(closed.stats.inFlight, 0, "after close()");
  await assertBack(m, "three loaders");
}, { skip });

const FAULT_CHILD = new URL("./fixtures/loader_parcel_fault.ts", import.meta.url).pathname;

// The first batch's copy fails inside the worker's prepareCopy + start
// (a submit that fails at once), later ones in a prepared copy's start or
// while staging: each names its leaf.
const FAULTS = [["background", "copy-submit:2+"], ["own thread", "copy-submit:2+"], ["own thread", "copy-submit:1"], ["own thread", "device-alloc:1"]];

for (const [mode, fault] of FAULTS) {
  test(`loader parcels: a copy that fails (MTC_FAULT=${fault}, staged on the ${mode}) is its batch's error, with the leaf's path, the batch and the worker`, async () => {
    const r = await runScript(FAULT_CHILD, [mode === "background" ? "background" : "own"], { MTC_FAULT: fault, FAKE_CUDA_QUIET: "1" });
    const shown = `code ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr.slice(-2000)}`;
    const line = r.stdout.split("\n").find((l) => l.startsWith("PARCEL-FAULT "));
    assert(line !== undefined, `the child reported: ${shown}`);
    const { taken, error } = JSON.parse(line.slice("PARCEL-FAULT ".length)) as { taken: number[]; error: Record<string, string> | null };
    assert(error !== null && error.code !== undefined, `next() rejected with an MtcError: ${shown}`);
    assertEquals(taken, taken.map((_, i) => i), "the batches before it, in order");
    assert(typeof error.path === "string" && /^\.(ids|boxes|samples\[\d\])$/.test(error.path), `the error names a leaf: ${error.path} (${error.message})`);
    assertSame(error.last?.trim(), `at batch ${taken.length} in loader worker 0`, "its stack says which batch and worker");
    assertSame(r.code, 0, shown);
  }, { skip, timeout: 60_000 });
}

const CPU_CHILD = new URL("./fixtures/loader_cpu_child.ts", import.meta.url).pathname;

// docs/LOADER.md's arena producer, to "cpu": the worker's copy gives the
// batch leaves of its own (an arena's memory cannot move), with the
// emulated driver (pinned arenas) and with no driver (pageable ones).
for (const driver of ["the emulated driver", "no driver"]) {
  test(`loader parcels: arena batches to "cpu" arrive exact, with ${driver}`, async () => {
    const vars: Record<string, string> = driver === "no driver" ? { MTC_CUDA_DRIVER: "/nonexistent/libcuda.so.1" } : {};
    const r = await runScript(CPU_CHILD, [], vars);
    const shown = `code ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr.slice(-2000)}`;
    const line = r.stdout.split("\n").find((l) => l.startsWith("LOADER-CPU "));
    assert(line !== undefined, `the child reported: ${shown}`);
    const { taken, wrong, error } = JSON.parse(line.slice("LOADER-CPU ".length)) as { taken: number[]; wrong: number[]; error: unknown };
    assertSame(error, null, shown);
    assertEquals(taken, [0, 1, 2, 3, 4, 5], "every batch, in order");
    assertEquals(wrong, [], "each batch's leaves read back as made");
    assertSame(r.code, 0, shown);
  }, { skip, timeout: 60_000 });
}
