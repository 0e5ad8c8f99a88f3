/**
 * D1, D2: copies between two GPUs, cuda:0 → cuda:1 (run only where there
 * are two devices).
 *
 *   D1  the example batch (528 leaves, 153,628 bytes) already on cuda:0
 *       library  startCopy(onGpu0, "cuda:1") → get(): its packed leaves by one
 *                gather launch on cuda:0 writing into cuda:1's blocks over
 *                peer access (a peer copy a leaf without it)
 *       extra    copyInto the same batch into DeviceTensors made once on
 *                cuda:1 (the same gather: they are libmtc's blocks), and,
 *                beside them, startCopy of the batch from the host to cuda:1
 *   D2  8 × 16 MiB float32 on cuda:0 → cuda:1 by startCopy, and copyInto
 *       DeviceTensor.empty buffers on cuda:1 (effective GB/s)
 *
 *   naive    one allocation on cuda:1 and one synchronous peer copy a leaf
 *   floor    one peer copy of the same bytes (cuMemcpyPeerAsync + sync),
 *            with peer access enabled where the pair has it, as libmtc does
 *
 * @module
 */

import { forEachLeaf, makeExampleBatch } from "../examples/example_batch.ts";
import { copyInto, DeviceTensor, disposeAll, startCopy } from "../ts/mod.ts";
import type { BenchTools } from "./decode_step.ts";
import { RawDriver } from "./driver.ts";
import type { ScenarioResult, Series } from "./report.ts";

type Tools = Pick<BenchTools, "driver" | "measure" | "summarize">;

/** D1 and D2, those of `ids` that are wanted. `driver` is cuda:0's, current on this thread before and after. */
export async function twoGpus(ids: readonly string[], runs: number, tools: Tools, randomFloats: (n: number, seed: number) => Float32Array): Promise<ScenarioResult[]> {
  const d0 = tools.driver;
  const d1 = new RawDriver(1);
  const peer = d1.enablePeer(d0);
  d0.use();
  console.log(`bench: D1, D2: cuda:0 → cuda:1, ${peer ? "with peer access" : "no peer access (the driver copies through the host)"}`);
  const rows: ScenarioResult[] = [];
  if (ids.includes("D1")) rows.push(await exampleBatch(runs, tools, d1));
  if (ids.includes("D2")) {
    const big = Array.from({ length: 8 }, (_, i) => randomFloats(4 << 20, 200 + i));
    rows.push(await largeLeaves(Math.max(10, Math.floor(runs / 10)), tools, d1, big));
  }
  return rows;
}

async function exampleBatch(n: number, tools: Tools, d1: RawDriver): Promise<ScenarioResult> {
  const { measure, summarize } = tools;
  const batch = makeExampleBatch(1);
  const onGpu0 = await startCopy(batch, "cuda:0");
  const existing = await startCopy(batch, "cuda:1");
  const sources = leavesOf(onGpu0);
  const bytes = sources.reduce((sum, t) => sum + t.byteLength, 0);
  const library = measure(n, () => {
    const handle = startCopy(onGpu0, "cuda:1");
    const out = handle.get();
    return () => {
      handle.dispose();
      disposeAll(out);
    };
  });
  // copyInto and host → cuda:1, alternating, so that both see the same machine.
  const into: number[] = [];
  const fromHost: number[] = [];
  measure(n, () => {
    const t0 = performance.now();
    copyInto(onGpu0, existing).get();
    const t1 = performance.now();
    const handle = startCopy(batch, "cuda:1");
    const out = handle.get();
    const t2 = performance.now();
    into.push(t1 - t0);
    fromHost.push(t2 - t1);
    return () => {
      handle.dispose();
      disposeAll(out);
    };
  });
  const result: ScenarioResult = {
    id: "D1",
    what: "example batch cuda:0 → cuda:1, startCopy → get() (naive: an allocation and a synchronous peer copy a leaf; floor: one peer copy)",
    leaves: sources.length,
    bytes,
    library: summarize(library),
    naive: naive(n, tools, d1, sources),
    floor: floor(bytes, n, tools, d1),
    extra: {
      "copyInto DeviceTensors made once on cuda:1 → get()": summarize(into.slice(-n)),
      "the same batch host → cuda:1, startCopy → get() (alternating with copyInto)": summarize(fromHost.slice(-n)),
    },
  };
  disposeAll([onGpu0, existing]);
  return result;
}

async function largeLeaves(n: number, tools: Tools, d1: RawDriver, big: Float32Array[]): Promise<ScenarioResult> {
  const { measure, summarize } = tools;
  const onGpu0 = await startCopy(big, "cuda:0");
  const buffers = big.map((a) => DeviceTensor.empty([a.length], "float32", "cuda:1"));
  const bytes = big.reduce((sum, a) => sum + a.byteLength, 0);
  const library = measure(n, () => {
    const handle = startCopy(onGpu0, "cuda:1");
    const out = handle.get();
    return () => {
      handle.dispose();
      disposeAll(out);
    };
  });
  const into = measure(n, () => {
    copyInto(onGpu0, buffers).get();
    return () => {};
  });
  const result: ScenarioResult = {
    id: "D2",
    what: "8 × 16 MiB float32 cuda:0 → cuda:1, startCopy → get() (naive: an allocation and a synchronous peer copy a leaf; floor: one peer copy)",
    leaves: big.length,
    bytes,
    library: summarize(library),
    naive: naive(n, tools, d1, onGpu0 as DeviceTensor[]),
    floor: floor(bytes, n, tools, d1),
    extra: { "copyInto DeviceTensor.empty buffers on cuda:1 → get()": summarize(into) },
  };
  disposeAll([onGpu0, buffers]);
  return result;
}

/** An allocation on cuda:1 and a synchronous peer copy for every leaf. */
function naive(n: number, { driver: d0, measure, summarize }: Tools, d1: RawDriver, sources: DeviceTensor[]): Series {
  const samples = measure(n, () => {
    d1.use();
    const owned = sources.map((t) => {
      const d = d1.alloc(t.byteLength);
      d1.copyFromPeer(d, d0, t.address, t.byteLength);
      return d;
    });
    return () => {
      owned.forEach((d) => d1.free(d));
      d0.use();
    };
  });
  return summarize(samples);
}

/** One peer copy of `bytes` from cuda:0 to cuda:1, then a sync. */
function floor(bytes: number, n: number, { driver: d0, measure, summarize }: Tools, d1: RawDriver): Series {
  const src = d0.alloc(bytes);
  d1.use();
  const dst = d1.alloc(bytes);
  const samples = measure(n, () => {
    d1.copyFromPeer(dst, d0, src, bytes);
    return () => {};
  });
  d1.free(dst);
  d0.use();
  d0.free(src);
  return summarize(samples);
}

function leavesOf(batch: unknown): DeviceTensor[] {
  const leaves: DeviceTensor[] = [];
  forEachLeaf(batch, (leaf) => leaves.push(leaf as DeviceTensor));
  return leaves;
}
