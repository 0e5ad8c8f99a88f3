/**
 * Soak run: copies the example batch (528 tensors, 153,628 bytes) to a CUDA
 * device over and over, every fourth result back to the host, disposing
 * everything, and samples memory and the library's pools as it goes. After
 * warm-up (the first fifth) nothing may grow: the pools must be back at
 * their baseline at every sample, native memory (RSS less the JS heap's
 * reserved size) within 16 MiB, the pinned pool and the device pool's live
 * allocations not at all. Prints a table and a verdict; exits 1 on failure.
 *
 *   bun bench/soak.ts --copies 100000
 *   deno run --allow-ffi --allow-env --allow-read bench/soak.ts --copies 100000
 *
 * Options: --copies N (default 100000), --device cuda:N (default cuda:0),
 * --samples K (rows in the table, default 40). Under Deno, add
 * `--v8-flags=--expose-gc` to sample the live heap after a collection.
 * Every 100th copy is read back and compared byte for byte.
 *
 * @module
 */

import { cudaUnavailableReason, type Device, disposeAll, libraryVersion, poolStats, startCopy, Tensor, type TypedArray } from "../ts/mod.ts";
import { CommandLine, exit, runtimeName } from "./cli.ts";
import { forEachLeaf, makeExampleBatch } from "../examples/example_batch.ts";
import { collect, mib, type Sample, takeSample } from "./memory.ts";

const MIB = 2 ** 20;
const NATIVE_SLACK = 16 * MIB;

const cli = new CommandLine(
  `usage: bun bench/soak.ts [--copies N] [--device cuda:N] [--samples K]

  --copies N        copies of the example batch, at least 10 (default 100000)
  --device cuda:N   the target (default cuda:0)
  --samples K       rows in the table, at least 2 (default 40)`,
  { copies: "string", device: "string", samples: "string" },
);
const copies = cli.count("copies", 100_000, 10);
const device = (cli.string("device") ?? "cuda:0") as Device;
const rows = cli.count("samples", 40, 2);
const noCuda = cudaUnavailableReason();
if (noCuda !== undefined) {
  console.log(`soak: no CUDA device: ${noCuda} (set MTC_CUDA_DRIVER to try the emulated driver)`);
  exit(1);
}


console.log(`soak: ${runtimeName()}, libmtc ${libraryVersion()}, ${copies} copies of the example batch to ${device}`);
const every = Math.max(1, Math.floor(copies / rows));
const warmUp = Math.floor(copies / 5);
let batches = Array.from({ length: 4 }, (_, i) => makeExampleBatch(i));
const baseline = poolStats();
const samples: Sample[] = [];
let checked = 0;
const failures: string[] = [];
const t0 = performance.now();
printHeader();
for (let i = 1; i <= copies; i++) {
  if (i % 1000 === 0) batches = Array.from({ length: 4 }, (_, k) => makeExampleBatch(i + k)); // fresh inputs now and then
  const input = batches[i % 4]!;
  const handle = startCopy(input, device);
  const onGpu = i % 2 === 0 ? await handle : handle.get();
  handle.dispose();
  if (i % 4 === 0) {
    const back = await startCopy(onGpu, "cpu");
    if (i % 100 === 0) {
      const problem = compare(back, input);
      if (problem !== null) failures.push(`copy ${i}: ${problem}`);
      checked++;
    }
    disposeAll(back);
  }
  disposeAll(onGpu);
  if (i % every === 0 || i === copies) {
    collect();
    await new Promise((resolve) => setTimeout(resolve, 0));
    const sample = takeSample(i, (performance.now() - t0) / 1000);
    samples.push(sample);
    printRow(sample);
    for (const key of ["plansLive", "blocksLive", "deviceBytesLive", "pinnedInUse"] as const) {
      const was = key === "pinnedInUse" ? baseline.pinnedBytesInUse : baseline[key];
      if (sample[key] !== was) failures.push(`after ${i} copies: ${key} is ${sample[key]}, was ${was} (every output was disposed)`);
    }
  }
}

const after = samples.filter((s) => s.copies >= warmUp);
const base = after[0]!;
const last = samples[samples.length - 1]!;
const max = (key: "native" | "rss" | "heapUsed" | "pinnedCached") => Math.max(...after.map((s) => s[key]));
if (max("native") - base.native > NATIVE_SLACK) failures.push(`native memory grew by ${mib(max("native") - base.native)} MiB after warm-up`);
if (max("pinnedCached") > base.pinnedCached) failures.push(`the pinned pool grew by ${mib(max("pinnedCached") - base.pinnedCached)} MiB after warm-up`);
console.log();
console.log(
  `${copies} copies in ${last.seconds.toFixed(1)} s (${(copies / last.seconds).toFixed(0)} copies/s); ${checked} read back and compared byte for byte`,
);
console.log(
  `after warm-up (${base.copies} copies): RSS ${mib(base.rss)} → max ${mib(max("rss"))} MiB, native ${mib(base.native)} → max ${mib(max("native"))} MiB ` +
    `(allowed +${mib(NATIVE_SLACK)}), pinned pool ${mib(base.pinnedCached)} → max ${mib(max("pinnedCached"))} MiB`,
);
if (failures.length > 0) {
  console.log(`FAIL (${failures.length}):`);
  for (const f of failures.slice(0, 20)) console.log(`  ${f}`);
  exit(1);
}
console.log("PASS: no growth after warm-up, pools back to baseline at every sample, every compared byte equal");

// ------------------------------------------------------------- helpers


/** The first leaf whose bytes differ, or null. */
function compare(actual: unknown, expected: unknown): string | null {
  const got: Uint8Array[] = [];
  forEachLeaf(actual, (leaf) => got.push(bytes(leaf as TypedArray | Tensor)));
  let i = 0;
  let problem: string | null = null;
  forEachLeaf(expected, (leaf, path) => {
    if (problem !== null) return;
    const a = got[i++];
    const e = bytes(leaf as TypedArray | Tensor);
    if (a === undefined || a.length !== e.length) problem = `${path}: ${a?.length ?? "no"} bytes, expected ${e.length}`;
    else {
      for (let j = 0; j < e.length; j++) {
        if (a[j] !== e[j]) {
          problem = `${path}: byte ${j} is ${a[j]}, expected ${e[j]}`;
          break;
        }
      }
    }
  });
  return problem;
}

function bytes(leaf: TypedArray | Tensor): Uint8Array {
  const view = leaf instanceof Tensor ? leaf.data : leaf;
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

function printHeader(): void {
  console.log(
    ["copies", "s", "copies/s", "RSS MiB", "native MiB", "heap MiB", "plans", "blocks", "device B", "pinned cache MiB", "pinned in use B"]
      .map((h) => h.padStart(10)).join(" "),
  );
}

function printRow(s: Sample): void {
  console.log(
    [
      s.copies,
      s.seconds.toFixed(1),
      (s.copies / s.seconds).toFixed(0),
      mib(s.rss),
      mib(s.native),
      mib(s.heapUsed),
      s.plansLive,
      s.blocksLive,
      s.deviceBytesLive,
      mib(s.pinnedCached),
      s.pinnedInUse,
    ].map((v) => String(v).padStart(10)).join(" "),
  );
}

