/**
 * Batches built and copied to the GPU on worker threads, used here in
 * order: startLoader with two workers, each building example batches
 * (examples/loader_batches.ts), at most two each ahead of this loop.
 *
 *   bun examples/loader.ts [--batches N]
 *   deno run --allow-ffi --allow-env --allow-read examples/loader.ts [--batches N]
 *
 * Needs a CUDA device (or the emulated driver: MTC_CUDA_DRIVER=emulated).
 */
import { cudaUnavailableReason, type DeviceTensor, disposeMoved, startLoader } from "../ts/mod.ts";
import { EXAMPLE_BATCH_TENSORS, makeExampleBatch } from "./example_batch.ts";

const args = (globalThis as { Bun?: unknown }).Bun !== undefined
  ? (globalThis as unknown as { process: { argv: string[] } }).process.argv.slice(2)
  : (globalThis as unknown as { Deno: { args: string[] } }).Deno.args;
const at = args.indexOf("--batches");
const batches = at >= 0 ? Number(args[at + 1]) : 20;
if (!Number.isInteger(batches) || batches < 1) throw new Error(`--batches wants a whole number >= 1, got ${args[at + 1]}`);
const SEED = 1000;

/** What a batch of the example is on the GPU: the leaf this example checks. */
type OnGpu = { gt_data: { class_ids: DeviceTensor } }[];

const noGpu = cudaUnavailableReason();
if (noGpu !== undefined) {
  console.log(`No CUDA device (${noGpu}): this example copies to a GPU.`);
} else {
  await using loader = startLoader<OnGpu>({
    module: new URL("./loader_batches.ts", import.meta.url),
    device: "cuda:0",
    workers: 2,
    depth: 2,
    batches,
    args: { seed: SEED },
  });
  let checked = 0;
  let index = 0;
  for await (const batch of loader) {
    // Stands for the training step: batch `index` is the one built from SEED + index.
    const ids = batch[0]!.gt_data.class_ids.toHost() as BigInt64Array;
    const expected = makeExampleBatch(SEED + index)[0]!.gt_data.class_ids;
    if (ids.some((v, i) => v !== expected[i])) throw new Error(`batch ${index} is not the one built from seed ${SEED + index}`);
    checked += ids.length;
    disposeMoved(batch); // the batch is ours: its device memory goes back now, one step per block
    index++;
  }
  console.log(`${index} example batches of ${EXAMPLE_BATCH_TENSORS} tensors built by 2 workers, copied to cuda:0 and taken in order; ${checked} class ids checked`);
}
