/**
 * The producer of examples/loader.ts, run by the loader's workers: batch
 * `index` is the example batch built from seed `args.seed + index`, in
 * fresh arrays each time (a real loader reads and decodes its samples
 * here).
 */
import type { LoaderContext } from "../ts/mod.ts";
import { type ExampleSample, makeExampleBatch } from "./example_batch.ts";

export default function exampleBatch(index: number, { args }: LoaderContext): ExampleSample[] {
  return makeExampleBatch((args as { seed: number }).seed + index);
}
