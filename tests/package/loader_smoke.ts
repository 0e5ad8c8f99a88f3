// Runs inside the scratch project of install_test.sh: startLoader from the
// installed package, whose workers run the package's own worker script
// (dist/loader_worker.js), copying six batches to cuda:0 (emulated driver).
// The producer (loader_batches.ts) imports the package too and uses every
// kind of leaf: each must arrive as a DeviceTensor holding the producer's
// values, and the arena's leaves must have been read where they lie.
//
//   loader_smoke.ts [PRODUCER]   PRODUCER: the producer module, relative to this file (default ./loader_batches.ts)
import { DeviceTensor, disposeAll, startLoader, Tensor } from "multi-tensor-copier";
import { expectedValues, LEAVES } from "./loader_batches.ts";

const g = globalThis as unknown as {
  Deno?: { args: string[] };
  process?: { argv: string[] };
  console: { log(line: string): void };
};
const args = g.Deno ? g.Deno.args : g.process!.argv.slice(2);

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`loader smoke: ${message}`);
}

type Batch = Record<(typeof LEAVES)[number], unknown> & { index: number; arenaDistance: number };

const seen: number[] = [];
const loader = startLoader<Batch>({
  module: new URL(args[0] ?? "./loader_batches.ts", import.meta.url),
  device: "cuda:0",
  workers: 2,
});
for await (const batch of loader) {
  for (const name of LEAVES) {
    const leaf = batch[name];
    check(leaf instanceof DeviceTensor && leaf.device === "cuda:0", `batch ${batch.index}: ${name} came back as ${String(leaf)}, not a DeviceTensor on cuda:0`);
    const back = leaf.toHost();
    const values = Array.from((back instanceof Tensor ? back.data : back) as ArrayLike<number>);
    const want = expectedValues(batch.index, name);
    check(values.join() === want.join(), `batch ${batch.index}: ${name} holds ${values}, not the producer's ${want}`);
  }
  // Read in place, the arena's two leaves share one device block at their distance in the arena (a gap
  // between them); staged, they would be packed next to each other with the staged leaves.
  const { tensor, arenaTensor, arenaArray, pinned } = batch as unknown as Record<string, DeviceTensor>;
  check(arenaTensor!.block === arenaArray!.block && arenaArray!.offset - arenaTensor!.offset === batch.arenaDistance,
    `batch ${batch.index}: the arena's leaves were not read in place (device offsets ${arenaTensor!.offset} and ${arenaArray!.offset}, ${batch.arenaDistance} apart in the arena)`);
  check(arenaTensor!.block !== tensor!.block && pinned!.block !== tensor!.block, `batch ${batch.index}: an arena or pinned leaf was staged with the pageable ones`);
  seen.push(batch.index);
  disposeAll(batch);
}
check(seen.join() === "0,1,2,3,4,5", `batches ${seen}`);
g.console.log(`loader ok: ${seen.join(",")}: ${LEAVES.join(", ")} as DeviceTensors with the producer's values; arena leaves read in place`);
