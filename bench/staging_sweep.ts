/**
 * S2 (8 × 16 MiB float32, pageable → cuda:0) and S7 (mixed: 4 × ~2 MB,
 * 4 × ~120 KB and 160 small leaves, pageable → cuda:0) across staging piece
 * sizes, to choose the defaults. The staging pool's size is fixed per
 * process: run it under several MTC_STAGING_THREADS values.
 *
 *   MTC_STAGING_THREADS=8 bun bench/staging_sweep.ts
 *   for t in 4 8 12 16; do MTC_STAGING_THREADS=$t bun bench/staging_sweep.ts; done
 *
 * `bench/c/plan_bench RUNS S2,S7 PIECE_BYTES` runs the same scenarios in C alone.
 *
 * @module
 */
import { disposeAll, startCopy } from "../ts/mod.ts";
import { getEnv } from "../ts/base/runtime.ts";
import { CommandLine } from "./cli.ts";
import { makeMixedBatch, mixedLeaves } from "./mixed_batch.ts";

new CommandLine("usage: [MTC_STAGING_THREADS=N] bun bench/staging_sweep.ts (no options): S2 and S7 across staging piece sizes", {});

function floats(bytes: number, seed: number): Float32Array {
  const a = new Float32Array(bytes >> 2);
  for (let i = 0; i < a.length; i += 64) a[i] = i + seed;
  return a;
}

const scenarios: Record<string, Float32Array[]> = {
  S2: Array.from({ length: 8 }, (_, k) => floats(16 << 20, k)),
  S7: mixedLeaves(makeMixedBatch(floats)),
};
const threads = getEnv("MTC_STAGING_THREADS") ?? "default";
for (const [id, leaves] of Object.entries(scenarios)) {
  const bytes = leaves.reduce((sum, a) => sum + a.byteLength, 0);
  for (const mib of [1, 2, 4, 8, 16, 32]) {
    const times: number[] = [];
    for (let i = 0; i < 45; i++) {
      const t0 = performance.now();
      const h = startCopy(leaves, "cuda:0", { stagingPieceBytes: mib << 20 });
      const out = h.get();
      const t1 = performance.now();
      h.dispose();
      disposeAll(out);
      if (i >= 5) times.push(t1 - t0);
    }
    times.sort((a, b) => a - b);
    const median = times[times.length >> 1]!;
    console.log(`${id}  threads ${threads}  piece ${String(mib).padStart(2)} MiB  median ${median.toFixed(3)} ms  ${(bytes / median / 1e6).toFixed(1)} GB/s`);
  }
}
