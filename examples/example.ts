/**
 * The main job: copy the example batch (16 samples, 528 tensors, 153,628 bytes)
 * to cuda:0 — or, on a machine with no CUDA device, to cpu, saying why — do
 * some other work while it runs, then print what arrived and how long it took.
 *
 *   bun examples/example.ts [--runs N] [--quiet]
 *   deno run --allow-ffi --allow-env --allow-read examples/example.ts [--runs N] [--quiet]
 *
 * From a checkout, `npx bun` and `npx deno` run the copies that
 * `npm run setup` put in node_modules. --help prints the options.
 */
import { parseArgs } from "node:util";
import { cudaUnavailableReason, type Device, DeviceTensor, disposeAll, startCopy, Tensor } from "../ts/mod.ts";
import { EXAMPLE_CONFIGS, type ExampleSample, makeExampleBatch } from "./example_batch.ts";

interface RuntimeGlobals {
  Deno?: { args: string[]; version: { deno: string }; exit(code: number): never };
  Bun?: { argv: string[]; version: string };
  process?: { exit(code: number): never };
}
const runtime = globalThis as unknown as RuntimeGlobals;

const USAGE = `usage: bun examples/example.ts [--runs N] [--quiet]
       deno run --allow-ffi --allow-env --allow-read examples/example.ts [--runs N] [--quiet]

Copies the example batch (528 tensors) to cuda:0, or to cpu where there is no
CUDA device, checks every tensor that arrived, and prints how long it took.

  --runs N   also time N copies (after a warm-up of up to 100), with get() and
             with await, and print the median, p10 and p90
  --quiet    print only the timing
  --help     print this`;

const { runs, quiet } = commandLine();
const log = quiet ? () => {} : console.log;

const noCuda = cudaUnavailableReason();
const device: Device = noCuda === undefined ? "cuda:0" : "cpu";
if (noCuda !== undefined) log(`No CUDA device (${noCuda}): copying to cpu instead, where every leaf is reused as it is.`);

const batch = makeExampleBatch(2024);

// One copy, with other work while it runs.
const started = performance.now();
const handle = startCopy(batch, device);
const returnedAfter = performance.now() - started;
const checksum = otherWork(batch);
const onDevice = await handle;
const finishedAfter = performance.now() - started;

log(`startCopy returned after ${us(returnedAfter)}; other work meanwhile (checksum ${checksum.toFixed(1)}).`);
log(`Copied to ${device} in ${us(finishedAfter)} from startCopy to completion.\n`);
log("sample  config  cameras  visible objects  gt objects  tensors on target  bytes");
onDevice.forEach((sample, i) => {
  const leaves = tensorLeaves(sample);
  const onTarget = leaves.filter((t) => (t instanceof DeviceTensor ? t.device : "cpu") === device).length;
  const bytes = leaves.reduce((sum, t) => sum + t.byteLength, 0);
  const visible = sample.cams_gt.reduce((sum, cam) => sum + shapeOf(cam.depths)[0], 0);
  log(
    `${pad(i, 6)}  ${pad(EXAMPLE_CONFIGS[i % 4].name, 6)}  ${pad(sample.cams_gt.length, 7)}  ` +
      `${pad(visible, 15)}  ${pad(shapeOf(sample.gt_data.class_ids)[0], 10)}  ${pad(onTarget, 17)}  ${bytes}`,
  );
});
const mismatches = compareWithInput(batch, onDevice);
log(`\nRead back and compared: ${mismatches === 0 ? "every tensor matches its input" : `${mismatches} MISMATCHES`}.`);
handle.dispose();
disposeAll(onDevice);
if (mismatches !== 0) exitWith(1);

if (runs > 0) await timeCopies(runs);

/** Times `runs` copies with get() and with await, after a warm-up. */
async function timeCopies(runs: number): Promise<void> {
  const warmUp = Math.min(100, runs);
  const withGet: number[] = [];
  const returned: number[] = [];
  for (let i = 0; i < warmUp + runs; i++) {
    const t0 = performance.now();
    const h = startCopy(batch, device);
    const t1 = performance.now();
    const out = h.get();
    const t2 = performance.now();
    h.dispose();
    disposeAll(out);
    if (i >= warmUp) {
      returned.push(t1 - t0);
      withGet.push(t2 - t0);
    }
  }
  const withAwait: number[] = [];
  for (let i = 0; i < warmUp + runs; i++) {
    const t0 = performance.now();
    const h = startCopy(batch, device);
    const out = await h;
    const t1 = performance.now();
    h.dispose();
    disposeAll(out);
    if (i >= warmUp) withAwait.push(t1 - t0);
  }
  console.log(`example batch to ${device}, ${runs} runs after ${warmUp} warm-up (${runtimeName()}):`);
  console.log(`  startCopy -> get()    ${summary(withGet)}`);
  console.log(`  startCopy -> await    ${summary(withAwait)}`);
  console.log(`  startCopy returns in  ${summary(returned)}`);
}

/** Some CPU work that does not touch the copy: a checksum of the float data. */
function otherWork(samples: ExampleSample[]): number {
  let sum = 0;
  for (const sample of samples) {
    for (const cam of sample.cams_gt) for (const v of cam.depths) sum += v;
    for (const v of sample.gt_data.bounding_boxes_3d.data as Float32Array) sum += v;
  }
  return sum;
}

type Leaf = DeviceTensor | Tensor | ArrayBufferView;

function tensorLeaves(sample: { cams_gt: object[]; gt_data: object }): Leaf[] {
  const leaves: Leaf[] = [];
  for (const part of [...sample.cams_gt, sample.gt_data]) leaves.push(...(Object.values(part) as Leaf[]));
  return leaves;
}

function shapeOf(t: Leaf): readonly number[] {
  if (t instanceof DeviceTensor || t instanceof Tensor) return t.shape;
  return [(t as unknown as { length: number }).length];
}

/** Bytes of a leaf, read back to the host when it is on a GPU. */
function hostBytes(t: Leaf): Uint8Array {
  const host = t instanceof DeviceTensor ? t.toHost() : t;
  const view = host instanceof Tensor ? host.data : host;
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

function compareWithInput(input: ExampleSample[], output: { cams_gt: object[]; gt_data: object }[]): number {
  let mismatches = 0;
  input.forEach((sample, i) => {
    const a = tensorLeaves(sample);
    const b = tensorLeaves(output[i]);
    a.forEach((leaf, j) => {
      const x = hostBytes(leaf);
      const y = hostBytes(b[j]);
      if (x.length !== y.length || x.some((v, k) => v !== y[k])) mismatches++;
    });
  });
  return mismatches;
}

function summary(ms: number[]): string {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return `median ${us(at(0.5))}  p10 ${us(at(0.1))}  p90 ${us(at(0.9))}`;
}

function us(ms: number): string {
  return `${(ms * 1000).toFixed(1)} µs`;
}

function pad(v: string | number, width: number): string {
  return String(v).padStart(width);
}

/** The options, parsed as node:util parseArgs does in both runtimes; exits on --help or a mistake. */
function commandLine(): { runs: number; quiet: boolean } {
  const args = runtime.Deno?.args ?? runtime.Bun?.argv.slice(2) ?? [];
  let values: { runs?: string; quiet?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args,
      options: { runs: { type: "string" }, quiet: { type: "boolean" }, help: { type: "boolean", short: "h" } },
      allowPositionals: false,
      strict: true,
    }));
  } catch (e) {
    return usageError((e as Error).message);
  }
  if (values.help) {
    console.log(USAGE);
    return exitWith(0);
  }
  const runs = values.runs === undefined ? 0 : Number(values.runs);
  if (values.runs !== undefined && (!/^[0-9]+$/.test(values.runs) || runs < 1 || runs > 1_000_000)) {
    return usageError(`--runs wants a number of copies from 1 to 1000000, not "${values.runs}"`);
  }
  return { runs, quiet: values.quiet ?? false };
}

function usageError(message: string): never {
  console.error(`example: ${message}\n\n${USAGE}`);
  return exitWith(2);
}

function runtimeName(): string {
  return runtime.Bun ? `bun ${runtime.Bun.version}` : `deno ${runtime.Deno!.version.deno}`;
}

function exitWith(code: number): never {
  if (runtime.Deno) runtime.Deno.exit(code);
  return runtime.process!.exit(code);
}
