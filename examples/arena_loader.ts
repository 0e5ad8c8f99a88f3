/**
 * A loader that builds each batch straight in pinned memory, so the copy to
 * the GPU is DMA alone: two arenas in rotation, one filled while the batch
 * in the other is copied and used.
 *
 *   bun examples/arena_loader.ts [--steps N]
 *   deno run --allow-ffi --allow-env --allow-read examples/arena_loader.ts [--steps N]
 *
 * Needs a CUDA device (or the emulated driver: MTC_CUDA_DRIVER=emulated).
 */
import { Arena, type AsyncCopyHandle, cudaUnavailableReason, type DeviceTensor, disposeAll, startCopy, type Tensor } from "../ts/mod.ts";

const stepsArg = (globalThis as { Bun?: unknown }).Bun !== undefined
  ? (globalThis as unknown as { process: { argv: string[] } }).process.argv.slice(2)
  : (globalThis as unknown as { Deno: { args: string[] } }).Deno.args;
const at = stepsArg.indexOf("--steps");
const steps = at >= 0 ? Number(stepsArg[at + 1]) : 20;
if (!Number.isInteger(steps) || steps < 1) throw new Error(`--steps wants a whole number >= 1, got ${stepsArg[at + 1]}`);

const noGpu = cudaUnavailableReason();
if (noGpu !== undefined) {
  console.log(`No CUDA device (${noGpu}): this example copies to a GPU.`);
} else {
  await run();
}

interface Sample {
  boxes: Tensor; // [objects, 4] float32
  labels: Int32Array; // [objects]
  image: Tensor; // [3, 32, 32] uint8
}

/** Writes sample `step` of the dataset into `arena` (a real loader decodes here). */
function fillSample(arena: Arena, step: number, index: number): Sample {
  const objects = 1 + ((step * 7 + index) % 13);
  const boxes = arena.tensor("float32", [objects, 4]);
  const labels = arena.array("int32", objects);
  const image = arena.tensor("uint8", [3, 32, 32]);
  const b = boxes.data as Float32Array;
  for (let i = 0; i < b.length; i++) b[i] = step + i / 8;
  for (let i = 0; i < objects; i++) labels[i] = step * 100 + i;
  (image.data as Uint8Array).fill((step + index) & 0xff);
  return { boxes, labels, image };
}

async function run(): Promise<void> {
  // Two arenas: the loader fills one while the other's copy runs. 1 MiB
  // holds this batch many times over; size it to your largest batch.
  const arenas = [Arena.create(1 << 20), Arena.create(1 << 20)];
  let previous: AsyncCopyHandle<unknown> | null = null;
  let checked = 0;
  for (let step = 0; step < steps; step++) {
    const arena = arenas[step % 2]!;
    // Waits until no copy reads this arena (the one started two steps ago),
    // then empties the views of that batch: the next batch cannot reach it.
    await arena.reset();
    const batch = Array.from({ length: 8 }, (_, i) => fillSample(arena, step, i));
    // Every leaf lies in the arena: one DMA from where they lie, no staging.
    // The DMA reads the arena after startCopy returns: do not write it until
    // the copy is over (reset() above waits for that).
    const onGpu = startCopy(batch, "cuda:0");
    // Meanwhile the previous batch is used.
    if (previous !== null) checked += useBatch(step - 1, await previous);
    previous = onGpu;
  }
  if (previous !== null) checked += useBatch(steps - 1, await previous);
  for (const arena of arenas) arena.dispose();
  console.log(`${steps} batches built in two pinned arenas and copied to cuda:0; ${checked} labels checked on the way back`);
}

/** Stands for the training step: checks the labels by copying them back, then frees the batch. */
function useBatch(step: number, onGpu: unknown): number {
  const samples = onGpu as { labels: DeviceTensor }[];
  let checked = 0;
  for (const sample of samples) {
    const labels = sample.labels.toHost() as Int32Array;
    labels.forEach((v, i) => {
      if (v !== step * 100 + i) throw new Error(`step ${step}: label ${i} is ${v}`);
      checked++;
    });
  }
  disposeAll(onGpu);
  return checked;
}
