/**
 * The producers of bench/workers.ts, run by the loader's workers: `example`
 * makes each example batch in fresh arrays, copied from one of 16 seeded
 * batches drawn once (drawing the random contents costs a worker ~0.5 ms a
 * batch, more than everything else: `generated` does that, as
 * examples/example.ts does); `arena` writes it into one of its worker's two
 * arenas, in turn, so that its copy reads it where it lies (no staging).
 */
import { Arena, type LoaderContext } from "../ts/mod.ts";
import { copyExampleBatch, type ExampleSample, makeExampleBatch } from "../examples/example_batch.ts";

/** The 16 seeded batches each batch is copied from, drawn on first use. */
let sources: ExampleSample[][] | undefined;

export function source(index: number): ExampleSample[] {
  sources ??= Array.from({ length: 16 }, (_, i) => makeExampleBatch(100 + i));
  return sources[index % 16]!;
}

export function example(index: number): ExampleSample[] {
  return copyExampleBatch(source(index));
}

export function generated(index: number): ExampleSample[] {
  return makeExampleBatch(index);
}

/** This worker's arenas, 1 MiB each (the example batch takes 160 KiB). */
let arenas: Arena[] | undefined;

export async function arena(index: number, { workers }: LoaderContext): Promise<ExampleSample[]> {
  arenas ??= [Arena.create(1 << 20), Arena.create(1 << 20)];
  const next = arenas[Math.floor(index / workers) % 2]!;
  // Once no copy reads it. The loader's worker waits for each copy before
  // it asks for the next batch, so this is at once; two arenas keep it so
  // if the copy of one batch ever overlaps the making of the next.
  await next.reset();
  return copyExampleBatch(source(index), next);
}
