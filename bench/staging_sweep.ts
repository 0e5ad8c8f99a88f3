/**
 * S2 (8 × 16 MiB float32, pageable → cuda:0) across staging piece sizes, to
 * choose the defaults. The staging pool's size is fixed per process: run it
 * under several MTC_STAGING_THREADS values.
 *
 *   MTC_STAGING_THREADS=8 bun bench/staging_sweep.ts
 *
 * @module
 */
import { disposeAll, startCopy } from "../ts/mod.ts";
import { getEnv } from "../ts/runtime.ts";
import { CommandLine } from "./cli.ts";

new CommandLine("usage: [MTC_STAGING_THREADS=N] bun bench/staging_sweep.ts (no options): S2 across staging piece sizes", {});

const leaves = Array.from({ length: 8 }, (_, k) => {
  const a = new Float32Array(4 << 20);
  for (let i = 0; i < a.length; i += 1024) a[i] = i + k;
  return a;
});
const bytes = leaves.reduce((sum, a) => sum + a.byteLength, 0);
const threads = getEnv("MTC_STAGING_THREADS") ?? "default";
for (const mib of [1, 2, 4, 8, 16, 32]) {
  const times: number[] = [];
  for (let i = 0; i < 25; i++) {
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
  console.log(`threads ${threads}  piece ${String(mib).padStart(2)} MiB  median ${median.toFixed(2)} ms  ${(bytes / median / 1e6).toFixed(1)} GB/s`);
}
