/**
 * S8, a decode step: five int32 arrays of 64 B to 16 KiB (22,592 bytes in
 * all: token ids, positions, sequence lengths, block tables, slot mapping)
 * copied on every step into static device buffers made once, as an
 * inference server does before it replays a CUDA graph that reads them.
 *
 *   library  copyInto(step, buffers) → get()
 *   naive    five synchronous copies into the same static buffers over the
 *            driver (cuMemcpyHtoDAsync + cuStreamSynchronize each)
 *   floor    one pinned DMA of the same bytes + sync
 *
 * And, in the same run, copyInto of the example batch (528 leaves) into
 * DeviceTensors made once, beside startCopy of the same batch (S1's copy,
 * which makes new outputs every time).
 *
 * @module
 */

import { makeExampleBatch } from "../examples/example_batch.ts";
import { copyInto, type DeviceTensor, disposeAll, startCopy } from "../ts/mod.ts";
import type { RawDriver } from "./driver.ts";
import type { ScenarioResult, Series } from "./report.ts";

/** What bench.ts lends: the driver and its ways of measuring. */
export interface BenchTools {
  driver: RawDriver;
  pointerOf: (view: ArrayBufferView) => number;
  /** Runs `step` warm-up + n times; each returns its clean-up, which is not timed. Milliseconds. */
  measure: (n: number, step: () => () => void) => number[];
  summarize: (ms: number[]) => Series;
  floorCopy: (bytes: number, n: number, direction: "toDevice" | "toHost") => Series;
}

/** Bytes of the five arrays of one step. */
export const DECODE_STEP_BYTES = [64, 512, 1536, 4096, 16384] as const;
const NAMES = ["tokenIds", "positions", "seqLens", "blockTables", "slotMapping"] as const;

type Step = Record<(typeof NAMES)[number], Int32Array>;

/** Step `k`'s arrays: new contents every step, as a server's would be. */
function makeStep(k: number): Step {
  const step = {} as Step;
  NAMES.forEach((name, i) => {
    const a = new Int32Array(DECODE_STEP_BYTES[i]! / 4);
    for (let j = 0; j < a.length; j++) a[j] = (k * 7919 + j * 31 + i) | 0;
    step[name] = a;
  });
  return step;
}

export async function decodeStep(id: string, n: number, tools: BenchTools): Promise<ScenarioResult> {
  const { driver, pointerOf, measure, summarize, floorCopy } = tools;
  const steps = Array.from({ length: 16 }, (_, k) => makeStep(k));
  const bytes = DECODE_STEP_BYTES.reduce((a, b) => a + b, 0);
  let next = 0;

  // The static buffers, made once with a startCopy of zeros.
  const buffers = await startCopy(makeStep(0), "cuda:0") as unknown as Record<string, DeviceTensor>;
  const library = measure(n, () => {
    copyInto(steps[next++ % steps.length]!, buffers).get();
    return () => {};
  });

  const staticBuffers = DECODE_STEP_BYTES.map((b) => driver.alloc(b));
  const naive = measure(n, () => {
    const step = steps[next++ % steps.length]!;
    NAMES.forEach((name, i) => driver.copyToDevice(staticBuffers[i]!, pointerOf(step[name]), DECODE_STEP_BYTES[i]!));
    return () => {};
  });
  staticBuffers.forEach((d) => driver.free(d));
  const floor = floorCopy(bytes, n, "toDevice");
  disposeAll(buffers);

  // The example batch: into DeviceTensors made once, against startCopy's new outputs, alternating.
  const batch = makeExampleBatch(1);
  const existing = startCopy(batch, "cuda:0").get();
  const into: number[] = [];
  const fresh: number[] = [];
  measure(n, () => {
    const t0 = performance.now();
    copyInto(batch, existing).get();
    const t1 = performance.now();
    const handle = startCopy(batch, "cuda:0");
    const out = handle.get();
    const t2 = performance.now();
    into.push(t1 - t0);
    fresh.push(t2 - t1);
    return () => {
      handle.dispose();
      disposeAll(out);
    };
  });
  disposeAll(existing);
  const intoSeries = summarize(into.slice(-n));
  const freshSeries = summarize(fresh.slice(-n));

  return {
    id,
    what: "decode step: 5 int32 arrays of 64 B–16 KiB copyInto static cuda:0 buffers (naive: 5 synchronous copies into the same buffers)",
    leaves: DECODE_STEP_BYTES.length,
    bytes,
    library: summarize(library),
    naive: summarize(naive),
    floor,
    extra: {
      "example batch: copyInto existing DeviceTensors → get()": intoSeries,
      "example batch: startCopy → get() (S1's copy), alternating with it": freshSeries,
      "example batch: copyInto / startCopy (ratio of pairs)": ratio(into.slice(-n), fresh.slice(-n)),
    },
  };
}

/** The per-pair ratio a / b, as a series (unitless, printed as it is). */
function ratio(a: number[], b: number[]): Series {
  const r = a.map((x, i) => x / b[i]!).sort((x, y) => x - y);
  const at = (q: number) => r[Math.min(r.length - 1, Math.floor(q * r.length))]!;
  return { median: at(0.5), p10: at(0.1), p90: at(0.9), runs: r.length };
}
