/**
 * The example batch's copy, for a trace file and its picture
 * (docs/TROUBLESHOOTING.md, "Seeing a copy"). Run with MTC_TRACE_FILE set:
 *
 *   MTC_TRACE_FILE=/tmp/copy.json bun scripts/trace_example.ts
 *   MTC_TRACE_FILE=/tmp/copy.json deno run --allow-ffi --allow-env --allow-read scripts/trace_example.ts
 *   MTC_TRACE_FILE=/tmp/loader.json bun scripts/trace_example.ts --workers 4
 *   python3 scripts/trace_picture.py /tmp/copy.json -o copy.svg
 *
 * Without --workers: the device warmed up, then the example batch copied to
 * cuda:0 --copies times (default 5), one after the other; the last one is a
 * warm copy (trace_picture.py draws the last copy by default). With
 * --workers N: startLoader with N workers building example batches and
 * copying them to cuda:0, the main thread taking --copies of them (default
 * 32); draw the last milliseconds (--last-ms).
 *
 * @module
 */
import { cudaUnavailableReason, disposeAll, startCopy, startLoader, warmUp } from "../ts/mod.ts";
import { getEnv } from "../ts/base/runtime.ts";
import { makeExampleBatch } from "../examples/example_batch.ts";

const args = (globalThis as { Bun?: unknown }).Bun !== undefined
  ? (globalThis as unknown as { process: { argv: string[] } }).process.argv.slice(2)
  : (globalThis as unknown as { Deno: { args: string[] } }).Deno.args;
function option(name: string, fallback: number): number {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} wants a whole number >= 1, got ${args[at + 1]}`);
  return value;
}
const workers = option("--workers", 0);
const copies = option("--copies", workers > 0 ? 32 : 5);

if (!getEnv("MTC_TRACE_FILE")) console.error("trace_example: MTC_TRACE_FILE is not set: the copies run, but no trace is written");
const noGpu = cudaUnavailableReason();
if (noGpu !== undefined) throw new Error(`trace_example needs a CUDA device (or MTC_CUDA_DRIVER=emulated): ${noGpu}`);
warmUp("cuda:0");

if (workers === 0) {
  for (let i = 0; i < copies; i++) disposeAll(await startCopy(makeExampleBatch(i), "cuda:0"));
  console.log(`trace_example: ${copies} copies of the example batch to cuda:0, one after the other`);
} else {
  await using loader = startLoader({
    module: new URL("../examples/loader_batches.ts", import.meta.url),
    device: "cuda:0",
    workers,
    depth: 2,
    batches: copies,
    args: { seed: 1 },
  });
  let taken = 0;
  for await (const batch of loader) {
    disposeAll(batch);
    taken++;
  }
  console.log(`trace_example: ${taken} example batches built and copied by ${workers} loader workers, taken by the main thread`);
}
