/**
 * S7's batch, shared by the bench scripts: 4 samples of a point cloud of
 * 1.5–2 MB, its label array of 100–130 KB and 40 small arrays of 40–400
 * bytes (168 float32 leaves, pageable), sized by a fixed seed.
 *
 * @module
 */
import { seededRandom } from "../examples/example_batch.ts";

/** One S7 sample. */
export interface MixedSample {
  points: Float32Array;
  labels: Float32Array;
  extras: Float32Array[];
}

/** The four samples; `make(bytes, seed)` makes each leaf (its contents are the caller's choice). */
export function makeMixedBatch(make: (bytes: number, seed: number) => Float32Array): MixedSample[] {
  const random = seededRandom(7);
  return Array.from({ length: 4 }, (_, i) => ({
    points: make(1_500_000 + Math.floor(random() * 500_000), 200 + i),
    labels: make(100_000 + Math.floor(random() * 30_000), 300 + i),
    extras: Array.from({ length: 40 }, (_, k) => make(40 + Math.floor(random() * 361), 1000 * i + k)),
  }));
}

/** The batch's leaves in order. */
export function mixedLeaves(batch: MixedSample[]): Float32Array[] {
  return batch.flatMap((m) => [m.points, m.labels, ...m.extras]);
}
