// Load through the emulated driver:
// - 64 handles in flight at once from one thread, each then taken by get(),
//   await, ready() polling, dispose() or simply dropped, in a seeded random
//   order; every value taken is checked, and the pools come back;
// - a long run of example-batch copies with RSS, heap and pool samples: no
//   growth after warm-up (bench/soak.ts is the 100,000-copy version);
// - child processes that exit, or just end, with copies in flight: exit
//   code 0, no signal, no hang.
import { type AsyncCopyHandle, cudaDeviceCount, DeviceTensor, disposeAll, poolStats, startCopy, Tensor, type TypedArray } from "../../ts/mod.ts";
import { makeExampleBatch, seededRandom } from "../../examples/example_batch.ts";
import { canCollectGarbage, collectGarbage, fakeDriver, skipWithoutDriver, tick, withCopyDelay } from "./fake_driver.ts";
import { assert, assertSame, env, note, runner, test } from "./harness.ts";
import { assertPoolsBack, checkBatch, collectUntil, poolDrift, poolMark, Tally } from "./fixtures/checks.ts";
import { runScript, type ScriptResult } from "./fixtures/spawn.ts";

const tally = new Tally("load");
const skip = skipWithoutDriver ??
  (!canCollectGarbage() ? "cannot force garbage collection (Deno: run with --v8-flags=--expose-gc, as `npm run test:one` does)" : undefined) ??
  (fakeDriver() === null ? "needs libfakecuda's hooks (copy delay)" : undefined);
if (skip !== undefined) note(`load tests skipped: ${skip}`);

// ------------------------------------------------------- 64 handles at once

const HANDLES = 64;
const ROUNDS = 6;
type Action = "get" | "await" | "poll" | "dispose" | "drop";
const ACTIONS: Action[] = ["get", "await", "poll", "dispose", "drop"];

/** A small batch of seeded leaves; one in eight also has a 300 KiB leaf (staged, not packed). */
function smallBatch(random: () => number): Record<string, unknown> {
  const leaves: (TypedArray | Tensor)[] = [];
  const count = 1 + Math.floor(random() * 12);
  for (let i = 0; i < count; i++) {
    const kind = Math.floor(random() * 4);
    const n = 1 + Math.floor(random() * 300);
    const bytes = new Uint8Array(n * 8);
    for (let j = 0; j < bytes.length; j++) bytes[j] = Math.floor(random() * 256);
    if (kind === 0) leaves.push(new Float32Array(bytes.buffer, 0, n));
    else if (kind === 1) leaves.push(new BigInt64Array(bytes.buffer, 0, n));
    else if (kind === 2) leaves.push(new Tensor(new Uint8Array(bytes.buffer, 0, n), [n], "bool"));
    else leaves.push(new Tensor(new Int16Array(bytes.buffer, 0, 2 * n), [n, 2]));
  }
  const batch: Record<string, unknown> = { leaves, tag: Math.floor(random() * 1000) };
  if (random() < 0.125) batch.big = new Float32Array(new Uint8Array(300 << 10).map((_, i) => i * 7).buffer);
  return batch;
}

test("load: 64 handles in flight, taken by get, await, poll, dispose or dropped in seeded random order", async () => {
  startCopy(new Uint8Array(1), "cuda:0").get().dispose(); // the driver reads its environment (delay 0) on first use
  const random = seededRandom(2024);
  const mark = poolMark();
  const counts: Record<Action, number> = { get: 0, await: 0, poll: 0, dispose: 0, drop: 0 };
  await withCopyDelay(1_000, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      // Sources for device → host and device → device copies.
      const onDevice = [smallBatch(random), smallBatch(random)].map((b) => ({ input: b, out: startCopy(b, "cuda:0").get() }));
      const expected: unknown[] = [];
      const handles: (AsyncCopyHandle<unknown> | null)[] = [];
      for (let i = 0; i < HANDLES; i++) {
        const pick = random();
        if (pick < 0.15) {
          const source = onDevice[i % 2]!;
          handles.push(startCopy(source.out, pick < 0.08 ? "cpu" : "cuda:1") as AsyncCopyHandle<unknown>);
          expected.push(source.input);
        } else {
          const batch = smallBatch(random);
          handles.push(startCopy(batch, random() < 0.5 ? "cuda:0" : "cuda:1") as AsyncCopyHandle<unknown>);
          expected.push(batch);
        }
      }
      assert(handles.some((h) => !h!.ready()), "some copies are in flight");
      // Visit the handles in a random order; awaits stay pending and are settled at random later points.
      const order = Array.from({ length: HANDLES }, (_, i) => i);
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
      const pending: Promise<void>[] = [];
      const taken = (i: number, value: unknown) => {
        checkBatch(toHost(value), expected[i], tally, `round ${round} handle ${i}`);
        disposeAll(value);
      };
      for (const i of order) {
        const h = handles[i]!;
        const action = ACTIONS[Math.floor(random() * ACTIONS.length)]!;
        counts[action]++;
        if (action === "get") taken(i, h.get());
        else if (action === "await") {
          pending.push(h.then((v) => {
            taken(i, v);
            h.dispose();
          }));
        }
        else if (action === "poll") {
          while (!h.ready()) await tick(0);
          taken(i, h.get());
        } else if (action === "dispose") h.dispose();
        if (action === "get" || action === "poll") h.dispose();
        handles[i] = null; // "drop": from here only the finalizer can release it
        if (pending.length > 0 && random() < 0.25) await pending.shift();
      }
      await Promise.all(pending);
      for (const source of onDevice) disposeAll(source.out);
      tally.copies += HANDLES + 2;
    }
  });
  const rounds = await collectUntil(() => poolDrift(mark) === "", 400);
  assert(rounds >= 0, `dropped handles were not reclaimed: ${poolDrift(mark)}`);
  assertPoolsBack(mark, "64 handles in flight");
  tally.cases++;
  note(`load (${runner}): ${ROUNDS} rounds of ${HANDLES} handles: ${JSON.stringify(counts)}; dropped ones reclaimed after ${rounds + 1} collection round(s)`);
}, { skip, timeout: 60_000 });

/** A copied batch as host data: DeviceTensors read back (each its own small copy), host leaves as they are. */
function toHost(value: unknown): unknown {
  if (value instanceof DeviceTensor) return value.toHost();
  if (Array.isArray(value)) return value.map(toHost);
  if (value !== null && typeof value === "object" && !(value instanceof Tensor) && !ArrayBuffer.isView(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toHost(v)]));
  }
  return value;
}

// ------------------------------------------------------------ long run

/** Memory of this process: resident set, and the JS heap's size and live part. */
function memory(): { rss: number; heapTotal: number; heapUsed: number } {
  const g = globalThis as unknown as {
    Deno?: { memoryUsage(): { rss: number; heapTotal: number; heapUsed: number } };
    process?: { memoryUsage(): { rss: number; heapTotal: number; heapUsed: number } };
  };
  return g.Deno !== undefined ? g.Deno.memoryUsage() : g.process!.memoryUsage();
}

const MIB = 2 ** 20;
/**
 * Allowed growth after warm-up. Native memory (RSS less the JS heap's
 * reserved size, which V8 grows in steps of its own accord) is judged by the
 * median of the last five samples, so that a passing allocator spike does
 * not count: it may rise by 32 MiB. The live JS heap after a forced
 * collection may rise by 8 MiB at any sample. Leaks of libmtc's own objects
 * are caught exactly by the counters checked at every sample; this bound is
 * for everything else. Measured: 3 MiB when this file runs alone, 7-19 MiB
 * after the other files in one Bun process (its allocator keeps what they
 * freed); a leak of 10 KiB a copy, a fifteenth of one batch's outputs, would
 * come to 39 MiB over the 4,000 copies after warm-up and fail.
 */
const NATIVE_SLACK = 32 * MIB;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
const HEAP_SLACK = 8 * MIB;

test("load: thousands of example-batch copies, RSS and pools flat after warm-up", async () => {
  const copies = Number(env("MTC_TEST_LOAD_COPIES") ?? 5_000);
  const every = Math.max(1, Math.floor(copies / 20));
  const warmUp = Math.floor(copies / 5);
  const random = seededRandom(7);
  let batches = Array.from({ length: 4 }, (_, i) => makeExampleBatch(i));
  const mark = poolMark();
  const samples: { copies: number; rss: number; native: number; heapUsed: number; pinnedCached: number; deviceAllocations: number }[] = [];
  const t0 = performance.now();
  for (let i = 1; i <= copies; i++) {
    if (i % 100 === 0) batches = Array.from({ length: 4 }, (_, k) => makeExampleBatch(i + k)); // fresh inputs now and then
    const input = batches[i % 4]!;
    const h = startCopy(input, i % 2 === 0 ? "cuda:0" : "cuda:1");
    const onGpu = random() < 0.5 ? await h : h.get();
    h.dispose();
    if (i % 4 === 0) {
      const back = await startCopy(onGpu, "cpu");
      if (i % 40 === 0) checkBatch(back, input, tally, `copy ${i}`);
      disposeAll(back); // gives the pinned block back at once
      tally.copies++;
    }
    disposeAll(onGpu);
    tally.copies++;
    if (i % every === 0) {
      collectGarbage();
      await tick(0);
      assertPoolsBack(mark, `after ${i} copies`); // every copy's outputs were disposed
      const m = memory();
      samples.push({
        copies: i,
        rss: m.rss,
        native: m.rss - m.heapTotal,
        heapUsed: m.heapUsed,
        pinnedCached: poolStats().pinnedBytesCached,
        deviceAllocations: fakeDriver()!.liveDeviceAllocations(),
      });
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const base = samples.find((s) => s.copies >= warmUp)!;
  const after = samples.filter((s) => s.copies >= warmUp);
  const maxOf = (key: "rss" | "native" | "heapUsed" | "pinnedCached" | "deviceAllocations") => Math.max(...after.map((s) => s[key]));
  const mib = (n: number) => (n / MIB).toFixed(1);
  const settled = median(after.slice(-5).map((s) => s.native));
  note(
    `load (${runner}): ${copies} example-batch copies in ${seconds.toFixed(1)} s; after warm-up (${warmUp}): ` +
      `RSS ${mib(base.rss)} → max ${mib(maxOf("rss"))} MiB, native ${mib(base.native)} → max ${mib(maxOf("native"))} MiB (settled ${mib(settled)}), ` +
      `live heap ${mib(base.heapUsed)} → max ${mib(maxOf("heapUsed"))} MiB, pinned cache ${mib(base.pinnedCached)} MiB, ` +
      `device allocations ${base.deviceAllocations}`,
  );
  assert(settled - base.native <= NATIVE_SLACK, `native memory grew by ${mib(settled - base.native)} MiB after warm-up (median of the last 5 samples)`);
  assert(maxOf("heapUsed") - base.heapUsed <= HEAP_SLACK, `the live JS heap grew by ${mib(maxOf("heapUsed") - base.heapUsed)} MiB after warm-up`);
  assertSame(maxOf("pinnedCached"), base.pinnedCached, "the pinned pool stopped growing after warm-up");
  assertSame(maxOf("deviceAllocations"), base.deviceAllocations, "device allocations stopped growing after warm-up");
  tally.cases++;
}, { skip, timeout: 120_000 });

// ------------------------------------------------------- exit in flight

const FIXTURE = new URL("./fixtures/exit_in_flight.ts", import.meta.url).pathname;
/**
 * Each copy in the child takes this long: waiting for them would take 40 s
 * and more. In "end-pageable" a pageable copy's driver call reads host
 * memory until its copy ends and the exit waits for one such read: shorter.
 */
const CHILD_DELAY_US: Record<string, number> = {
  "exit": 10_000_000,
  "end": 10_000_000,
  "exit-await": 10_000_000,
  "end-pageable": 500_000,
  "end-staging": 0,
  "workers": 100_000,
};

function runChild(mode: string, fixture = FIXTURE): Promise<ScriptResult> {
  // The emulated driver's lines on the child's own stderr, where the test looks for them.
  return runScript(fixture, [mode], { FAKE_CUDA_COPY_DELAY_US: String(CHILD_DELAY_US[mode]), FAKE_CUDA_QUIET: "", FAKE_CUDA_LOG: "" });
}

const CHILD_DOES: Record<string, string> = {
  "exit": "exits at once",
  "end": "just ends",
  "exit-await": "exits while awaiting",
  "end-pageable": "ends while the library reads its memory in a pageable copy",
  "end-staging": "ends while the library stages 48 copies of 8 MiB from its memory",
};
/** Runs of each child: the exit races the staging, so the staging one goes several times. */
const CHILD_RUNS: Record<string, number> = { "end-staging": 5 };

for (const mode of Object.keys(CHILD_DOES)) {
  test(`load: a child process that ${CHILD_DOES[mode]} with copies in flight exits cleanly`, async () => {
    assert(cudaDeviceCount() >= 2, "the child copies to cuda:0 and cuda:1");
    for (let run = 0; run < (CHILD_RUNS[mode] ?? 1); run++) {
      const r = await runChild(mode);
      const shown = `code ${r.code}, signal ${r.signal}, ${r.ms.toFixed(0)} ms\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
      const started = /started (\d+) copies, (\d+) in flight/.exec(r.stdout);
      const copies = mode === "end-staging" ? 48 : 8;
      assert(started !== null && Number(started[1]) === copies, `the child started its copies: ${shown}`);
      // The staging child's first copies may be done by the time it counts.
      assert(mode === "end-staging" ? Number(started[2]) > 0 : Number(started[2]) === copies, `copies in flight: ${shown}`);
      assert(!r.stdout.includes("unexpected"), `no copy finished before the exit: ${shown}`);
      assertSame(r.signal, null, `no signal: ${shown}`);
      assertSame(r.code, 0, `exit code 0: ${shown}`);
      assert(!/fake_cuda:|panic|Segmentation|Aborted|error/i.test(r.stderr), `nothing on stderr: ${shown}`);
      assert(r.ms < 10_000, `no hang: ${shown}`);
      note(`load (${runner}): child "${mode}" with ${started[2]} of ${copies} copies in flight exited in ${r.ms.toFixed(0)} ms`);
      tally.copies += copies;
    }
    tally.cases++;
  }, { skip, timeout: 30_000 });
}

const WORKER_FIXTURE = new URL("./fixtures/worker_exit.ts", import.meta.url).pathname;

test("load: workers that close or are terminated with copies in flight leave the process running and exiting cleanly", async () => {
  const r = await runChild("workers", WORKER_FIXTURE);
  const shown = `code ${r.code}, signal ${r.signal}, ${r.ms.toFixed(0)} ms\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
  assertSame(r.signal, null, `no signal: ${shown}`);
  assertSame(r.code, 0, `exit code 0: ${shown}`);
  assert(r.stdout.includes("worker_exit: done"), `the process went on after the workers ended: ${shown}`);
  const reports = [...r.stdout.matchAll(/(\d+) of 24 copies in flight, useBackgroundThread (true|false)/g)];
  assertSame(reports.length, 4, `four workers reported: ${shown}`);
  assert(reports.every((m) => Number(m[1]) > 0), `copies were in flight when each worker ended: ${shown}`);
  // Deno frees a worker's memory with no event first: there copies stage before startCopy returns.
  const expected = runner === "deno" ? "false" : "true";
  assert(reports.every((m) => m[2] === expected), `useBackgroundThread defaults to ${expected} in a ${runner} worker: ${shown}`);
  assert(!/panic|Segmentation|Aborted|error/i.test(r.stderr), `nothing on stderr: ${shown}`);
  note(`load (${runner}): 4 workers ended with copies in flight; the process exited in ${r.ms.toFixed(0)} ms`);
  tally.cases++;
  tally.copies += 4 * 24;
}, { skip, timeout: 60_000 });

test("load: totals: every case ran, every copy checked", () => tally.check(runner, { cases: 8, copies: 7014, bytes: 26_676_532 }), { skip });
