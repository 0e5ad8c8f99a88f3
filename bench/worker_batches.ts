/**
 * The producers of bench/workers.ts, run by the loader's workers: `example`
 * builds the example batch in fresh arrays, as examples/example.ts does;
 * `arena` writes it into one of its worker's two arenas, in turn, so that
 * its copy reads it where it lies (no staging).
 */
import { Arena, type LoaderContext } from "../ts/mod.ts";
import { type ExampleSample, makeExampleBatch } from "../examples/example_batch.ts";

export function example(index: number): ExampleSample[] {
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
  return makeExampleBatch(index, next);
}
