/**
 * The prepared-copy scenarios: the example batch copied through a copy
 * prepared once from a sample of it (prepareCopy, prepareCopyInto), each
 * beside the plain call on the same batches (in the naive column) and the
 * floor, in one process. Each timed span ends once every leaf of the
 * result has been read once (its shape and address), so leaves made on
 * first read would count too.
 *
 * S1r   prepared startCopy of the example batch (pageable leaves) → cuda:0; naive column: startCopy
 * S1pr  the same from an arena batch (the leaves in pinned memory); naive column: startCopy of it
 * I1r   prepared copyInto of the example batch (pageable) into fixed DeviceTensors; naive column: copyInto
 * I1ar  the same from an arena batch; naive column: copyInto of it
 *
 * S1r's extra series: disposeResult of a result (the documented per-block
 * dispose) beside disposeAll of a plain result.
 */
import { Arena, copyInto, type DeviceTensor, disposeAll, prepareCopy, prepareCopyInto, startCopy } from "../ts/mod.ts";
import { forEachLeaf, makeExampleBatch } from "../examples/example_batch.ts";
import type { ScenarioResult, Series } from "./report.ts";

type HostView = ArrayBufferView & { byteLength: number };

export interface PreparedBench {
  wanted(id: string): boolean;
  runs: number;
  measure(n: number, step: () => () => void): number[];
  summarize(ms: number[]): Series;
  floorCopy(bytes: number, n: number, direction: "toDevice" | "toHost"): Series;
  leavesOf(batch: unknown): HostView[];
}

export const PREPARED_SCENARIOS = ["S1r", "S1pr", "I1r", "I1ar"];

/** Reads every leaf of a result once, as a user would: its shape and its address. */
function touch(result: unknown): number {
  let sum = 0;
  forEachLeaf(result, (leaf) => {
    const t = leaf as DeviceTensor;
    sum += t.shape.length + t.address;
  });
  return sum;
}

function row(b: PreparedBench, id: string, what: string, batch: unknown, library: number[], naive: number[], extra: Record<string, Series> = {}): ScenarioResult {
  const leaves = b.leavesOf(batch);
  const bytes = leaves.reduce((sum, v) => sum + v.byteLength, 0);
  return { id, what, leaves: leaves.length, bytes, library: b.summarize(library), naive: b.summarize(naive), floor: b.floorCopy(bytes, b.runs, "toDevice"), extra };
}

/** startCopy's rows: prepared, then plain, on the same batch. */
function startRows(b: PreparedBench, id: string, what: string, batch: unknown, extra: boolean): ScenarioResult {
  using prepared = prepareCopy(batch, "cuda:0");
  const library = b.measure(b.runs, () => {
    const out = prepared.start(batch).get();
    touch(out);
    return () => prepared.disposeResult(out);
  });
  const plain = b.measure(b.runs, () => {
    const out = startCopy(batch, "cuda:0").get();
    touch(out);
    return () => disposeAll(out);
  });
  const series: Record<string, Series> = {};
  if (extra) {
    const outs = Array.from({ length: 8 }, () => prepared.start(batch).get());
    series["disposeResult of a prepared result"] = b.summarize(b.measure(b.runs, () => {
      const out = outs.pop() ?? prepared.start(batch).get();
      prepared.disposeResult(out);
      return () => outs.push(prepared.start(batch).get());
    }));
    outs.forEach((out) => prepared.disposeResult(out));
    const plainOuts = Array.from({ length: 8 }, () => startCopy(batch, "cuda:0").get());
    series["disposeAll of a plain result"] = b.summarize(b.measure(b.runs, () => {
      disposeAll(plainOuts.pop() ?? startCopy(batch, "cuda:0").get());
      return () => plainOuts.push(startCopy(batch, "cuda:0").get());
    }));
    disposeAll(plainOuts);
  }
  return row(b, id, what, batch, library, plain, series);
}

/** copyInto's rows: prepared, then plain, into the same DeviceTensors. */
function intoRows(b: PreparedBench, id: string, what: string, batch: unknown): ScenarioResult {
  const buffers = startCopy(batch, "cuda:0").get();
  using prepared = prepareCopyInto(batch, buffers);
  const library = b.measure(b.runs, () => {
    touch(prepared.start(batch).get());
    return () => {};
  });
  const plain = b.measure(b.runs, () => {
    touch(copyInto(batch, buffers).get());
    return () => {};
  });
  disposeAll(buffers);
  return row(b, id, what, batch, library, plain);
}

export function preparedScenarios(b: PreparedBench): ScenarioResult[] {
  const results: ScenarioResult[] = [];
  const batch = makeExampleBatch(1);
  const arena = Arena.create(1 << 20);
  const inArena = arena.consolidate(batch);
  if (b.wanted("S1r")) results.push(startRows(b, "S1r", "prepared startCopy, example batch → cuda:0; naive column: startCopy", batch, true));
  if (b.wanted("S1pr")) results.push(startRows(b, "S1pr", "prepared startCopy, example batch in an arena → cuda:0; naive column: startCopy", inArena, false));
  if (b.wanted("I1r")) results.push(intoRows(b, "I1r", "prepared copyInto, example batch into fixed DeviceTensors; naive column: copyInto", batch));
  if (b.wanted("I1ar")) results.push(intoRows(b, "I1ar", "prepared copyInto, the arena batch into fixed DeviceTensors; naive column: copyInto", inArena));
  arena.dispose();
  return results;
}
