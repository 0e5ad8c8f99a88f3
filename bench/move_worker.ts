/**
 * A worker of bench/workers.ts: copies `count` example batches to cuda:0
 * and posts each result moved, for the main thread to time taking and
 * disposing them apart from everything else. With `parcels`, as a loader's
 * worker does: each batch written into one of two arenas, copied by one
 * prepared copy and moved while it runs (one parcel a batch).
 */
import { Arena, moveResult, prepareCopy, type PreparedCopy, startCopy } from "../ts/mod.ts";
import { copyExampleBatch, type ExampleSample, makeExampleBatch } from "../examples/example_batch.ts";

const scope = globalThis as unknown as {
  onmessage: ((event: { data: { count: number; parcels?: boolean } }) => void) | null;
  postMessage(message: unknown): void;
};

scope.onmessage = async ({ data }) => {
  if (data.parcels !== true) {
    for (let i = 0; i < data.count; i++) {
      scope.postMessage(moveResult(startCopy(makeExampleBatch(i), "cuda:0", { useBackgroundThread: false })));
    }
    return;
  }
  const sources = Array.from({ length: 16 }, (_, i) => makeExampleBatch(100 + i));
  const arenas = [Arena.create(1 << 20), Arena.create(1 << 20)];
  let prepared: PreparedCopy<ExampleSample[]> | undefined;
  for (let i = 0; i < data.count; i++) {
    const arena = arenas[i % 2]!;
    await arena.reset();
    const batch = copyExampleBatch(sources[i % 16]!, arena);
    prepared ??= prepareCopy(batch, "cuda:0", { useBackgroundThread: false });
    scope.postMessage(moveResult(prepared.start(batch)));
  }
};
