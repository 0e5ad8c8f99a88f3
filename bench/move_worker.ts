/**
 * A worker of bench/workers.ts: copies `count` example batches to cuda:0
 * and posts each result moved, for the main thread to time taking and
 * disposing them apart from everything else.
 */
import { moveResult, startCopy } from "../ts/mod.ts";
import { makeExampleBatch } from "../examples/example_batch.ts";

const scope = globalThis as unknown as {
  onmessage: ((event: { data: { count: number } }) => void) | null;
  postMessage(message: unknown): void;
};

scope.onmessage = ({ data }) => {
  for (let i = 0; i < data.count; i++) {
    scope.postMessage(moveResult(startCopy(makeExampleBatch(i), "cuda:0", { useBackgroundThread: false })));
  }
};
