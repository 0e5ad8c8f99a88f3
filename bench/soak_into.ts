/**
 * Soak run of copyInto: copies into the same memory over and over in six
 * directions (host→host, host→cuda:0, cuda:0→host, cuda:0→cuda:0,
 * cuda:0→cuda:1, cuda:1→cuda:0), each copy a batch of small leaves (packed)
 * and two leaves past the packing threshold (each on its own), and samples
 * memory and the library's pools as it goes. Rounds take turns at three
 * ways of finishing a copy: awaited one after the other, all six started
 * and awaited out of order, or started with some handles dropped unawaited
 * (the garbage collector's backstop releases those). Every --check-every
 * rounds each direction gets new bytes and its destination is read back
 * and compared byte for byte. The verdict: RSS at the end within 5% of RSS
 * after the first third (the last two thirds of the soak), every compared
 * byte equal, the pools back at their baseline once the dropped handles are
 * collected. Prints a table and a verdict; exits 1 on failure.
 *
 *   deno run --allow-ffi --allow-env --allow-read --v8-flags=--expose-gc bench/soak_into.ts --copies 300000
 *   bun bench/soak_into.ts --copies 300000
 *
 * Without a GPU, `bash scripts/soak.sh` runs it on the emulated driver with
 * two devices. Options: --copies N (default 300000), --mode
 * mixed|await|out-of-order|drop (default mixed), --samples K (default 30),
 * --check-every R (default 50), --max-seconds S (stop early, saying so).
 *
 * @module
 */

import { copyInto, cudaDeviceCount, cudaUnavailableReason, type DeviceTensor, disposeAll, libraryVersion, poolStats, startCopy, Tensor, type TypedArray } from "../ts/mod.ts";
import { CommandLine, exit, runtimeName } from "./cli.ts";
import { seededRandom } from "../examples/example_batch.ts";
import { canCollect, collect, mib, type Sample, takeSample } from "./memory.ts";

const GROWTH_LIMIT = 0.05;
/** Leaves above 16 KiB are copied on their own, smaller ones packed: small batches still take both paths. */
const OPTIONS = { packThresholdBytes: 16 << 10 };
const MODES = ["await", "out-of-order", "drop"] as const;
type Mode = (typeof MODES)[number];

const cli = new CommandLine(
  `usage: deno run --allow-ffi --allow-env --allow-read --v8-flags=--expose-gc bench/soak_into.ts [options]

  --copies N        copyInto calls in all, at least 60 (default 300000)
  --mode M          mixed (default: rounds take turns), await, out-of-order or drop
  --samples K       rows in the table, at least 3 (default 30)
  --check-every R   read back and compare every R rounds of six copies (default 50)
  --max-seconds S   stop after S seconds, reporting what was done`,
  { copies: "string", mode: "string", samples: "string", "check-every": "string", "max-seconds": "string" },
);
const copies = cli.count("copies", 300_000, 60);
const modeArg = cli.string("mode") ?? "mixed";
if (modeArg !== "mixed" && !(MODES as readonly string[]).includes(modeArg)) cli.fail(`--mode wants mixed, ${MODES.join(", ")}; not "${modeArg}"`);
const rows = cli.count("samples", 30, 3);
const checkEvery = cli.count("check-every", 50, 1);
const maxSeconds = cli.count("max-seconds", 0, 0);
const noCuda = cudaUnavailableReason();
if (noCuda !== undefined) {
  console.log(`soak_into: no CUDA device: ${noCuda} (bash scripts/soak.sh runs it on the emulated driver)`);
  exit(1);
}
if (!canCollect()) console.log("soak_into: no forced collections (under Deno add --v8-flags=--expose-gc): dropped handles wait for the collector");

// ------------------------------------------------------------- the lanes

type Where = "cpu" | "cuda:0" | "cuda:1";
type Batch = Record<string, TypedArray | Tensor | DeviceTensor>;

/** One source and the destination it is copied into, again and again. */
interface Lane {
  name: string;
  from: Where;
  to: Where;
  source: Batch;
  destination: Batch;
}

/** Host leaves: ten small ones of assorted dtypes and shapes, two of 24 and 40 KiB. */
function hostBatch(seed: number): Record<string, TypedArray | Tensor> {
  const b: Record<string, TypedArray | Tensor> = {
    f32: new Float32Array(7),
    i32: new Tensor(new Int32Array(15), [3, 5], "int32"),
    u8: new Uint8Array(100),
    f64: new Tensor(new Float64Array(4), [2, 2], "float64"),
    i16: new Int16Array(33),
    i64: new BigInt64Array(9),
    row: new Float32Array(256),
    u16: new Tensor(new Uint16Array(60), [6, 10], "uint16"),
    one: new Int8Array(1),
    mid: new Float32Array(1000),
    big: new Float32Array(6 * 1024),
    bigger: new Tensor(new Uint8Array(40 << 10), [40, 1024], "uint8"),
  };
  fill(b, seed);
  return b;
}

/** New bytes in every host leaf of `b`, drawn from `seed`. */
function fill(b: Record<string, TypedArray | Tensor>, seed: number): void {
  const random = seededRandom(seed);
  for (const leaf of Object.values(b)) {
    const bytes = bytesOf(leaf);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (random() * 256) | 0;
  }
}

function bytesOf(leaf: TypedArray | Tensor): Uint8Array {
  const view = leaf instanceof Tensor ? leaf.data : leaf;
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

/** `host` on `where`: itself for the host, else DeviceTensors (small ones views into one block). */
async function place(host: Record<string, TypedArray | Tensor>, where: Where): Promise<Batch> {
  if (where === "cpu") return host;
  return (await startCopy(host, where, OPTIONS)) as unknown as Batch;
}

async function makeLane(from: Where, to: Where, seed: number): Promise<Lane> {
  return {
    name: `${from}→${to}`,
    from,
    to,
    source: await place(hostBatch(seed), from),
    destination: await place(hostBatch(seed + 1), to),
  };
}

const twoGpus = cudaDeviceCount() >= 2;
const DIRECTIONS: [Where, Where][] = [["cpu", "cpu"], ["cpu", "cuda:0"], ["cuda:0", "cpu"], ["cuda:0", "cuda:0"]];
if (twoGpus) DIRECTIONS.push(["cuda:0", "cuda:1"], ["cuda:1", "cuda:0"]);
else console.log("soak_into: one GPU: cuda:0→cuda:1 and cuda:1→cuda:0 are left out");
// The lanes that are awaited and checked, and the lanes of dropped handles:
// a dropped copy may still land later, so it never shares memory with a checked one.
const lanes: Lane[] = [];
const dropLanes: Lane[] = [];
for (const [i, [from, to]] of DIRECTIONS.entries()) {
  lanes.push(await makeLane(from, to, 100 + 10 * i));
  dropLanes.push(await makeLane(from, to, 500 + 10 * i));
}

// ------------------------------------------------------------- the soak


const baseline = poolStats();
const every = Math.max(lanes.length, Math.floor(copies / rows));
const samples: Sample[] = [];
const failures: string[] = [];
const counts: Record<Mode, number> = { "await": 0, "out-of-order": 0, "drop": 0 };
let done = 0;
let dropped = 0;
let checkedRounds = 0;
let checkedBytes = 0;
let nextSample = every;
let stoppedEarly = false;
const shuffle = seededRandom(7);
console.log(
  `soak_into: ${runtimeName()}, libmtc ${libraryVersion()}, ${copies} copyInto in ${lanes.length} directions ` +
    `(${lanes.map((l) => l.name).join(", ")}), mode ${modeArg}, ${Object.keys(lanes[0]!.source).length} leaves a copy`,
);
const t0 = performance.now();
printHeader();
samples.push(takeSample(0, (performance.now() - t0) / 1000));
printRow(samples[0]!);
for (let round = 0; done < copies; round++) {
  const mode: Mode = modeArg === "mixed" ? MODES[round % MODES.length]! : (modeArg as Mode);
  if (round % checkEvery === 0) await checkedRound(round);
  else await plainRound(mode, round);
  counts[mode] += lanes.length;
  done += lanes.length;
  if (done >= nextSample || done >= copies) {
    nextSample += every;
    collect();
    await tick();
    samples.push(takeSample(done, (performance.now() - t0) / 1000));
    printRow(samples[samples.length - 1]!);
    if (maxSeconds > 0 && (performance.now() - t0) / 1000 >= maxSeconds && done < copies) {
      stoppedEarly = true;
      break;
    }
  }
}
const seconds = (performance.now() - t0) / 1000;
const settled = await settle();
report();

/** One copy per direction, finished the way `mode` says. */
async function plainRound(mode: Mode, round: number): Promise<void> {
  if (mode === "await") {
    for (const [i, lane] of lanes.entries()) {
      const h = copyInto(lane.source, lane.destination, OPTIONS);
      if (i % 2 === 0) h.get();
      else await h;
      h.dispose();
    }
  } else if (mode === "out-of-order") {
    const handles = lanes.map((lane) => copyInto(lane.source, lane.destination, OPTIONS));
    for (let i = handles.length - 1; i > 0; i--) {
      const j = Math.floor(shuffle() * (i + 1));
      [handles[i], handles[j]] = [handles[j]!, handles[i]!];
    }
    for (const h of handles) {
      await h;
      h.dispose();
    }
  } else {
    // Every other handle is dropped unawaited; the rest are awaited.
    for (const [i, lane] of dropLanes.entries()) {
      const h = copyInto(lane.source, lane.destination, OPTIONS);
      if ((round + i) % 2 === 0) {
        await h;
        h.dispose();
      } else dropped++;
    }
  }
}

/** New bytes into every source, one copy per direction, each destination read back and compared. */
async function checkedRound(round: number): Promise<void> {
  checkedRounds++;
  for (const [i, lane] of lanes.entries()) {
    const expected = hostBatch(round * 16 + i);
    if (lane.from === "cpu") {
      for (const [key, leaf] of Object.entries(expected)) bytesOf(lane.source[key] as TypedArray | Tensor).set(bytesOf(leaf));
    } else {
      const refill = copyInto(expected, lane.source, OPTIONS);
      await refill;
      refill.dispose();
    }
    const h = copyInto(lane.source, lane.destination, OPTIONS);
    await h;
    h.dispose();
    const got = lane.to === "cpu" ? lane.destination : ((await startCopy(lane.destination, "cpu")) as unknown as Batch);
    for (const [key, leaf] of Object.entries(expected)) {
      const a = bytesOf(got[key] as TypedArray | Tensor);
      const e = bytesOf(leaf);
      checkedBytes += e.length;
      const at = firstDifference(a, e);
      if (at >= 0) failures.push(`round ${round}, ${lane.name}, .${key}: byte ${at} is ${a[at]}, expected ${e[at]}`);
    }
    if (got !== lane.destination) disposeAll(got);
  }
}

function firstDifference(a: Uint8Array, e: Uint8Array): number {
  if (a.length !== e.length) return 0;
  for (let i = 0; i < e.length; i++) if (a[i] !== e[i]) return i;
  return -1;
}

/** Collects until the dropped handles have let their plans go (at most 10 s); whether they did. */
async function settle(): Promise<boolean> {
  const deadline = performance.now() + 10_000;
  while (performance.now() < deadline) {
    collect();
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (poolStats().plansLive === baseline.plansLive) return true;
  }
  return false;
}

function tick(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

function report(): void {
  const last = samples[samples.length - 1]!;
  const third = samples.find((s) => s.copies >= done / 3) ?? last;
  const later = samples.filter((s) => s.copies >= third.copies);
  const maxRss = Math.max(...later.map((s) => s.rss));
  const growth = (last.rss - third.rss) / third.rss;
  const stats = poolStats();
  console.log();
  console.log(
    `${done} copyInto in ${seconds.toFixed(1)} s (${(done / seconds).toFixed(0)}/s): ${counts.await} awaited in turn, ` +
      `${counts["out-of-order"]} awaited out of order, ${counts.drop} in rounds that dropped handles (${dropped} dropped unawaited); ` +
      `${checkedRounds} rounds read back, ${checkedBytes} bytes compared`,
  );
  console.log(
    `RSS: start ${mib(samples[0]!.rss)} MiB, after the first third (${third.copies} copies) ${mib(third.rss)} MiB, ` +
      `end ${mib(last.rss)} MiB (max ${mib(maxRss)} MiB since the third): ${(growth * 100).toFixed(2)}% over the last two thirds ` +
      `(limit ${GROWTH_LIMIT * 100}%); native (RSS less the JS heap) ${mib(third.native)} → ${mib(last.native)} MiB, ` +
      `JS heap ${mib(third.heapTotal)} → ${mib(last.heapTotal)} MiB of which used ${mib(third.heapUsed)} → ${mib(last.heapUsed)} MiB`,
  );
  console.log(
    `pools after settling: plans ${stats.plansLive} (baseline ${baseline.plansLive}), blocks ${stats.blocksLive}, ` +
      `device bytes ${stats.deviceBytesLive}, pinned in use ${stats.pinnedBytesInUse} B, pinned cache ${mib(stats.pinnedBytesCached)} MiB`,
  );
  if (stoppedEarly) console.log(`stopped after ${maxSeconds} s (--max-seconds): ${done} of ${copies} copies`);
  if (growth >= GROWTH_LIMIT) failures.push(`RSS grew by ${(growth * 100).toFixed(2)}% over the last two thirds`);
  if (!settled) failures.push(`${stats.plansLive - baseline.plansLive} plans still live 10 s after the soak (dropped handles not released)`);
  for (const key of ["blocksLive", "deviceBytesLive", "pinnedBytesInUse"] as const) {
    if (stats[key] !== baseline[key]) failures.push(`after the soak ${key} is ${stats[key]}, was ${baseline[key]} before it`);
  }
  if (failures.length > 0) {
    console.log(`FAIL (${failures.length}):`);
    for (const f of failures.slice(0, 20)) console.log(`  ${f}`);
    exit(1);
  }
  console.log("PASS: RSS within 5% over the last two thirds, every compared byte equal, the pools back at their baseline");
  disposeAll([lanes.map((l) => [l.source, l.destination]), dropLanes.map((l) => [l.source, l.destination])]);
}


function printHeader(): void {
  console.log(
    ["copies", "s", "copies/s", "RSS MiB", "native MiB", "heap MiB", "heap used", "plans", "blocks", "device B", "pinned cache MiB", "pinned in use B"]
      .map((h) => h.padStart(10)).join(" "),
  );
}

function printRow(s: Sample): void {
  console.log(
    [
      s.copies,
      s.seconds.toFixed(1),
      s.seconds > 0 ? (s.copies / s.seconds).toFixed(0) : "-",
      mib(s.rss),
      mib(s.native),
      mib(s.heapTotal),
      mib(s.heapUsed),
      s.plansLive,
      s.blocksLive,
      s.deviceBytesLive,
      mib(s.pinnedCached),
      s.pinnedInUse,
    ].map((v) => String(v).padStart(10)).join(" "),
  );
}
