/**
 * One worker of bench/loop_scale.ts: a loader worker's loop on its own, with
 * no consumer (an example batch written into one of two arenas, its prepared
 * copy started and moved, the parcel before it dropped), timed phase by
 * phase over the second half of `count` batches. Posts each phase's median
 * and mean, and the loop's own time per batch, in microseconds.
 */
import {
  Arena,
  dropMoved,
  type Moved,
  moveResult,
  prepareCopy,
  type PreparedCopy,
} from "../ts/mod.ts";
import {
  copyExampleBatch,
  type ExampleSample,
  makeExampleBatch,
} from "../examples/example_batch.ts";

const scope = globalThis as unknown as {
  onmessage: ((event: { data: { count: number } }) => void) | null;
  postMessage(message: unknown): void;
};

const PHASES = ["reset", "make", "start", "move", "drop"];

scope.onmessage = async ({ data: { count } }) => {
  const sources = Array.from(
    { length: 16 },
    (_, i) => makeExampleBatch(100 + i),
  );
  const arenas = [Arena.create(1 << 20), Arena.create(1 << 20)];
  let prepared: PreparedCopy<ExampleSample[]> | undefined;
  const times: number[][] = PHASES.map(() => []);
  let previous: Moved | null = null;
  let half = 0;
  for (let i = 0; i < count; i++) {
    const arena = arenas[i % 2]!;
    const t0 = performance.now();
    await arena.reset();
    const t1 = performance.now();
    const batch = copyExampleBatch(sources[i % 16]!, arena);
    const t2 = performance.now();
    prepared ??= prepareCopy(batch, "cuda:0", { useBackgroundThread: false });
    const handle = prepared.start(batch);
    const t3 = performance.now();
    const moved = moveResult(handle);
    const t4 = performance.now();
    if (previous !== null) dropMoved(previous); // its copy has had a batch's time
    previous = moved;
    const t5 = performance.now();
    if (i === count / 2) half = t0;
    if (i < count / 2) continue;
    [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4].forEach((t, p) =>
      times[p]!.push(t * 1000)
    );
  }
  const loop = (performance.now() - half) * 1000 / (count - count / 2);
  if (previous !== null) dropMoved(previous);
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
  const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
  scope.postMessage({
    medians: times.map(median),
    means: times.map(mean),
    loop,
  });
};
