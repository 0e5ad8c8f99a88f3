// startLoader when a producer or a worker goes wrong in ways other than an
// Error thrown by the producer (loader.test.ts has that one): something
// that is no Error thrown or rejected with, a batch postMessage cannot
// clone, a thread ended from inside, a failure outside the producer's call,
// a producer that never settles. Each must end the stream at its batch's
// turn with an Error that says what happened (never hand a thrown value
// out as a batch, never leave next() or close() waiting), the batches
// before it first; and the pools and the parcels in transit must come back.
// One worker each where the number does not matter: `deno test`
// type-checks each worker's modules as it starts (about 1 s).
import { disposeAll, Loader, type LoaderOptions, MtcError, ownerAlive, startLoader } from "../../ts/mod.ts";
import { hasOwners } from "../../ts/ffi/owner.ts";
import { fakeDriver, skipWithoutDriver, tick } from "./fake_driver.ts";
import { assert, assertRejects, assertSame, assertThrows, note, runner, test } from "./harness.ts";
import { assertBack, mark } from "./fixtures/loader_checks.ts";
import { ENDINGS, THROWN, UNSENDABLE } from "./fixtures/loader_failing.ts";
import { runScript } from "./fixtures/spawn.ts";
import { toHost } from "./fixtures/threads.ts";

const PRODUCERS = new URL("./fixtures/loader_failing.ts", import.meta.url);
const skip = skipWithoutDriver ??
  (fakeDriver() === null ? "needs the emulated driver" : undefined) ??
  (!hasOwners() ? "this libmtc has no owners (mtc/owner.h): results cannot move between threads" : undefined);
if (skip !== undefined) note(`loader error tests skipped: ${skip}`);

interface Small {
  index: number;
  values: Float32Array;
}

/** A bound on a wait that must end, so that a hang fails with a message instead of stalling the run (never a measure). */
const HANG_LIMIT_MS = 20_000;

function settles<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${HANG_LIMIT_MS} ms`)), HANG_LIMIT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

function loaderOf(producer: string, args: Record<string, unknown>, options: Partial<LoaderOptions> = {}): Loader<Small> {
  return startLoader<Small>({ module: PRODUCERS, export: producer, device: "cuda:0", workers: 1, args, ...options });
}

/** Takes batches 0 .. count - 1 and checks each: its index, and its values on the device. */
async function takeFirst(loader: Loader<Small>, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const { value, done } = await settles(loader.next(), `batch ${i}`);
    assert(done !== true, `batch ${i} came`);
    assertSame(value.index, i, "in index order");
    const values = (toHost(value) as { values: Float32Array }).values;
    assert(values.length === 16 && values.every((v) => v === i), `batch ${i}'s values`);
    disposeAll(value);
  }
}

/** Takes batches 1 and 2 (after takeFirst(loader, 1)). */
async function takeFirst2(loader: Loader<Small>): Promise<void> {
  for (const i of [1, 2]) {
    const { value, done } = await settles(loader.next(), `batch ${i}`);
    assert(done !== true, `batch ${i} came`);
    assertSame(value.index, i, "in index order");
    disposeAll(value);
  }
}

/** The next next() rejects with an MtcError of `code` whose message has `includes`; then the loader is done, and its memory back. */
async function expectEnd(loader: Loader<Small>, code: string, includes: string, m: ReturnType<typeof mark>, what: string): Promise<MtcError> {
  const e = await assertRejects(() => settles(loader.next(), what), MtcError, includes);
  assertSame(e.code, code, `${what}: ${e.message}`);
  assertSame((await loader.next()).done, true, `${what}: closed after the error`);
  await settles(loader.close(), `${what}: close()`);
  await assertBack(m, what);
  return e;
}

const DESCRIBED: Record<string, string> = {
  string: 'threw the string "the disk is full" for batch 2, not an Error',
  number: "threw the number 42 for batch 2",
  undefined: "threw undefined for batch 2",
  null: "threw null for batch 2",
  object: 'threw an object {"reason":"plain"} for batch 2',
  symbol: "threw a symbol (Symbol(odd)) for batch 2",
  rejectString: 'threw the string "rejected" for batch 2',
  rejectUndefined: "threw undefined for batch 2",
};

test("loader errors: a producer that throws or rejects with something that is no Error ends the stream at that batch, saying what it threw", async () => {
  for (const kind of Object.keys(DESCRIBED)) {
    const m = mark();
    const loader = loaderOf("throwing", { at: 2, kind });
    await takeFirst(loader, 2);
    const e = await expectEnd(loader, "MTC_ERR_INVALID_ARGUMENT", DESCRIBED[kind]!, m, kind);
    assert(e.stack!.includes("at batch 2 in loader worker 0"), `${kind}: which batch and worker: ${e.stack}`);
  }
}, { skip, timeout: 120_000 });

test("loader errors: a producer's Error that cannot cross as it is becomes an MtcError saying so, at its batch", async () => {
  const cases: [string, string][] = [
    ["strangeCause", "the error of batch 2 cannot be sent to the loader's thread: Error: with a strange cause"],
    ["functionStack", "the error of batch 2 cannot be sent to the loader's thread"],
  ];
  for (const [kind, includes] of cases) {
    const m = mark();
    const loader = loaderOf("throwing", { at: 2, kind });
    await takeFirst(loader, 2);
    await expectEnd(loader, "MTC_ERR_INVALID_ARGUMENT", includes, m, kind);
  }
}, { skip, timeout: 60_000 });

const UNSENT: Record<string, [path: string, what: string]> = {
  function: [".cams[1].onLoad", "holds a function, which postMessage cannot send"],
  symbol: [".meta.tag", "holds a symbol (Symbol(tag))"],
  classWithFunction: ['.extra["reader"].read', "holds a function"],
  mapKey: [".extra", "holds a function as a Map key"],
  promise: [".pending[0]", "holds an object of class Promise"],
  root: ["", "holds a function"],
};

test("loader errors: a batch postMessage cannot clone is an MtcError at its turn naming the batch and the value's path, its device memory given back", async () => {
  for (const kind of Object.keys(UNSENDABLE)) {
    const m = mark();
    const loader = loaderOf("unsendable", { at: 2, kind });
    await takeFirst(loader, 2);
    const [path, what] = UNSENT[kind]!;
    const e = await expectEnd(loader, "MTC_ERR_INVALID_ARGUMENT", `startLoader: batch 2 ${what}`, m, kind);
    assertSame(e.path, path, `${kind}: ${e.message}`);
    assert(e.message.split("\n").length === 1, `${kind}: one line, no dump of the clone error: ${e.message}`);
    assert(e.stack!.includes("at batch 2 in loader worker 0"), `${kind}: ${e.stack}`);
  }
}, { skip, timeout: 120_000 });

// Bun's workers have no close(): there, calling it is a TypeError, which is the producer's error.
const WAYS = runner === "deno" ? Object.keys(ENDINGS) : ["processExit"];

test("loader errors: a producer that ends its own thread ends the stream at that batch with an MtcError naming the worker", async () => {
  for (const way of WAYS) {
    const m = mark();
    const loader = loaderOf("ending", { at: 2, kind: way }, { workers: 2 });
    await takeFirst(loader, 2);
    await expectEnd(loader, "MTC_ERR_INVALID_STATE", "loader worker 0 ended before it sent batch 2", m, way);
  }
  if (runner === "bun") {
    const m = mark();
    const loader = loaderOf("ending", { at: 1, kind: "selfClose" });
    await takeFirst(loader, 1);
    const e = await assertRejects(() => settles(loader.next(), "self.close() in Bun"), Error, "close is not a function");
    assertSame(e.name, "TypeError");
    assert(e.stack!.includes("at batch 1 in loader worker 0"), e.stack);
    await loader.close();
    await assertBack(m, "self.close() in Bun");
  }
}, { skip, timeout: 120_000 });

test("loader errors: batches a worker posted just before its thread ended are handed out before the error", async () => {
  const m = mark();
  const shared = new SharedArrayBuffer(16);
  const owner = new Float64Array(shared, 0, 1);
  const go = new Int32Array(shared, 8, 1);
  const loader = loaderOf("postThenEnd", { at: 0, kind: "", shared }, { depth: 1 });
  const first = loader.next(); // waits: the loader watches worker 0's thread
  const limit = performance.now() + HANG_LIMIT_MS;
  while (owner[0] === 0 && performance.now() < limit) await tick(1); // the producer runs batch 0
  // This thread stays busy from before the worker posts batch 0 until well after its thread
  // ended: its last message and the watch's timer are then both due, in whichever order the
  // runtime runs them.
  Atomics.store(go, 0, 1);
  Atomics.notify(go, 0);
  while (ownerAlive(owner[0]!) && performance.now() < limit) { /* busy */ }
  assert(!ownerAlive(owner[0]!), "the worker's thread ended");
  for (const until = performance.now() + 100; performance.now() < until;) { /* past the watch's period */ }
  const { value } = await settles(first, "batch 0");
  assertSame(value?.index, 0, "batch 0, posted before the thread ended, is handed out");
  disposeAll(value);
  await expectEnd(loader, "MTC_ERR_INVALID_STATE", "loader worker 0 ended before it sent batch 1", m, "posted, then ended");
}, { skip, timeout: 60_000 });

// What the error says: the worker reports it itself (Deno, `bun run`); under `bun test` only its error event comes, with the error's text.
const OUTSIDE: Record<string, [worker: string, event: string]> = {
  uncaught: ["an uncaught error outside the producer's call: RangeError: the reader's timer failed", "RangeError: the reader's timer failed"],
  unhandled: ["an unhandled rejection outside the producer's call: URIError: a prefetch nobody awaited failed", "URIError: a prefetch nobody awaited failed"],
  bareReason: ['an unhandled rejection outside the producer\'s call: the string "a bare reason"', "a bare reason"],
};

test("loader errors: an uncaught error or unhandled rejection in a worker, outside the producer's call, ends the stream at the batch it was making", async () => {
  for (const kind of Object.keys(OUTSIDE)) {
    const m = mark();
    const loader = loaderOf("outside", { at: 2, kind });
    await takeFirst(loader, 2);
    const [said, event] = OUTSIDE[kind]!;
    const e = await expectEnd(loader, "MTC_ERR_INVALID_STATE", "startLoader: loader worker 0 failed before batch 2: ", m, kind);
    const byEvent = runner === "bun" && !e.message.includes("outside the producer's call");
    assert(e.message.endsWith(byEvent ? event : said), `${kind}: ${e.message}`);
    if (!byEvent && kind !== "bareReason") assert(String(e.cause).includes(event), `${kind}: the error as its cause: ${e.cause}`);
  }
}, { skip, timeout: 120_000 });

test("loader errors: a worker that fails after its last batch was sent changes nothing: the stream ends as it would", async () => {
  const m = mark();
  const loader = loaderOf("lastThenFail", { at: 2, kind: "" }, { batches: 3, depth: 3 });
  await takeFirst(loader, 1);
  await tick(200); // batches 1 and 2 and whatever the worker sent after them have arrived
  await takeFirst2(loader);
  assertSame((await settles(loader.next(), "the end")).done, true, "the stream ends after batch 2");
  await loader.close();
  await assertBack(m, "failed after its last batch");
}, { skip, timeout: 60_000 });

const CHILD = new URL("./fixtures/loader_child_errors.ts", import.meta.url).pathname;

test("loader errors: in a script, a worker reports its own uncaught errors and rejections at their batch, and nothing is printed", async () => {
  for (const kind of Object.keys(OUTSIDE)) {
    const r = await runScript(CHILD, [kind], { FAKE_CUDA_QUIET: "", FAKE_CUDA_LOG: "" });
    const shown = `${kind}: code ${r.code}, signal ${r.signal}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
    assert(r.stdout.includes("took batch 0\ntook batch 1\n"), `the batches before it: ${shown}`);
    const said = JSON.parse(r.stdout.split("\n").find((line) => line.startsWith("{")) ?? "null");
    assert(said !== null && said.mtc === true && said.code === "MTC_ERR_INVALID_STATE", `an MtcError: ${shown}`);
    assert(said.message.endsWith(`loader worker 0 failed before batch 2: ${OUTSIDE[kind]![0]}`), `the worker's own report: ${shown}`);
    assertSame(r.stderr, "", `nothing on stderr: ${shown}`);
    assertSame(r.code, 0, shown);
  }
}, { skip, timeout: 120_000 });

test("loader errors: a producer that never settles: close() still ends the loader, the waiting next() is done, nothing is left", async () => {
  const m = mark();
  const loader = loaderOf("neverSettles", { at: 2, kind: "" });
  await takeFirst(loader, 2);
  const waiting = loader.next();
  await settles(loader.close(), "close()");
  assertSame((await settles(waiting, "the waiting next()")).done, true);
  await assertBack(m, "never settles");
}, { skip, timeout: 60_000 });

test("loader errors: a Loader is made by startLoader only", () => {
  const Constructor = Loader as unknown as new (...args: unknown[]) => unknown;
  assertThrows(() => new Constructor(), MtcError, "new Loader(): a Loader is made by startLoader");
  assertThrows(() => new Constructor({ kind: "start", module: String(PRODUCERS), workers: 1e6 }, 1e6, 2, undefined), MtcError, "made by startLoader");
}, { skip });
