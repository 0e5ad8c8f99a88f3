/**
 * The pinned-memory scenarios: the same batches built in pinned memory of
 * the library's (arenas, pinned tensors), which copies read in place.
 *
 * S1p  the example batch consolidated into an arena → cuda:0 (walked); the fill apart
 * S1a  the same arena as one copy (startArenaCopy: no walk)
 * S2p  8 pinned tensors of 16 MiB → cuda:0
 * S7p  S7's mixed leaves consolidated into an arena → cuda:0
 * S4p  the example batch on cuda:0 copyInto arena destinations, beside copyInto pageable
 *      arrays of the same shapes (in the naive column; the floor as S4's)
 *
 * Each also prints one copy's staging counters (bytes staged, leaves read
 * in place).
 */
import { Arena, copyInto, disposeAll, pinnedArray, startArenaCopy, startCopy } from "../ts/mod.ts";
import { makeExampleBatch } from "../examples/example_batch.ts";
import { makeMixedBatch } from "./mixed_batch.ts";
import type { ScenarioResult, Series } from "./report.ts";

type HostView = ArrayBufferView & { byteLength: number };

export interface PinnedBench {
  wanted(id: string): boolean;
  runs: number;
  hostToDevice(id: string, what: string, leaves: HostView[], batch: unknown, n: number, withExtras: boolean): Promise<ScenarioResult>;
  measure(n: number, step: () => () => void): number[];
  summarize(ms: number[]): Series;
  floorCopy(bytes: number, n: number, direction: "toDevice" | "toHost"): Series;
  leavesOf(batch: unknown): HostView[];
}

/** One copy's staging counters, printed under the table. */
const counters: string[] = [];

function countOnce(id: string, batch: unknown): void {
  const handle = startCopy(batch, "cuda:0");
  disposeAll(handle.get());
  const s = handle.stats();
  counters.push(`${id}: ${s.bytesStaged} bytes staged, ${s.leavesDirect} of ${s.leaves} leaves read in place, ${s.copiesIssued} DMA/kernel submissions`);
  handle.dispose();
}

export async function pinnedScenarios(b: PinnedBench): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  if (b.wanted("S1p") || b.wanted("S1a")) {
    const batch = makeExampleBatch(1);
    const arena = Arena.create(1 << 20);
    const fill = b.measure(b.runs, () => {
      if (!arena.tryReset()) throw new Error("S1p: the arena is busy between fills");
      arena.consolidate(batch);
      return () => {};
    });
    const inArena = arena.consolidate((arena.tryReset(), batch));
    const leaves = b.leavesOf(inArena);
    if (b.wanted("S1p")) {
      countOnce("S1p", inArena);
      const r = await b.hostToDevice("S1p", "example batch in an arena → cuda:0 (walked)", leaves, inArena, b.runs, false);
      r.extra["fill: consolidate into the arena"] = b.summarize(fill);
      results.push(r);
    }
    if (b.wanted("S1a")) {
      const library = b.measure(b.runs, () => {
        const handle = startArenaCopy(arena, "cuda:0");
        const out = handle.get();
        return () => {
          handle.dispose();
          out.dispose();
        };
      });
      const floor = b.floorCopy(arena.used, b.runs, "toDevice");
      const naive = (await b.hostToDevice("S1a", "", leaves, inArena, 10, false)).naive;
      results.push({ id: "S1a", what: "the same arena as one copy (startArenaCopy) → cuda:0", leaves: leaves.length, bytes: arena.used, library: b.summarize(library), naive, floor, extra: {} });
    }
    arena.dispose();
  }
  if (b.wanted("S2p")) {
    const big = Array.from({ length: 8 }, (_, i) => {
      const a = pinnedArray("float32", 4 << 20);
      for (let k = 0; k < a.length; k += 1024) a[k] = i + k;
      return a;
    });
    countOnce("S2p", big);
    results.push(await b.hostToDevice("S2p", "8 × 16 MiB float32, pinned tensors → cuda:0", big, big, Math.max(10, Math.floor(b.runs / 10)), false));
    disposeAll(big);
  }
  if (b.wanted("S7p")) {
    const mixed = makeMixedBatch((bytes, seed) => {
      const a = new Float32Array(bytes >> 2);
      a.fill(seed);
      return a;
    });
    const arena = Arena.create(16 << 20);
    const inArena = arena.consolidate(mixed);
    countOnce("S7p", inArena);
    results.push(await b.hostToDevice("S7p", "S7's leaves in an arena → cuda:0", b.leavesOf(inArena), inArena, Math.max(20, Math.floor(b.runs / 4)), false));
    arena.dispose();
  }
  if (b.wanted("S4p")) results.push(intoArena(b));
  return results;
}

/** S4p: copyInto from cuda:0 into arena destinations, and into pageable arrays, alternating. */
function intoArena(b: PinnedBench): ScenarioResult {
  const batch = makeExampleBatch(4);
  const onGpu = startCopy(batch, "cuda:0").get();
  const arena = Arena.create(1 << 20);
  const pinnedDest = arena.consolidate(batch);
  const pageableDest = startCopy(batch, "cpu", { copyHostLeaves: true }).get(); // fresh pageable arrays, same structure
  const pinned: number[] = [], pageable: number[] = [];
  for (let i = 0; i < b.runs * 2; i++) {
    const into = i % 2 === 0 ? pinnedDest : pageableDest;
    const t0 = performance.now();
    copyInto(onGpu, into).get();
    (i % 2 === 0 ? pinned : pageable).push(performance.now() - t0);
  }
  const handle = copyInto(onGpu, pinnedDest);
  handle.get();
  const s = handle.stats();
  counters.push(`S4p: ${s.leavesDirect} of ${s.leaves} destinations written in place by the GPU, ${s.copiesIssued} DMA/kernel submissions`);
  const leaves = b.leavesOf(batch);
  const bytes = leaves.reduce((sum, v) => sum + v.byteLength, 0);
  const warm = Math.floor(b.runs / 4);
  const result: ScenarioResult = {
    id: "S4p",
    what: "example batch cuda:0 copyInto arena destinations (pinned, written in place); naive column: copyInto pageable arrays",
    leaves: leaves.length,
    bytes,
    library: b.summarize(pinned.slice(warm)),
    naive: b.summarize(pageable.slice(warm)),
    floor: b.floorCopy(bytes, b.runs, "toHost"),
    extra: {},
  };
  disposeAll(onGpu);
  arena.dispose();
  return result;
}

export function printPinnedCounters(): void {
  if (counters.length === 0) return;
  console.log("\nStaging counters of one copy (pinned scenarios):");
  for (const line of counters) console.log(`  ${line}`);
}
