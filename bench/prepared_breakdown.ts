/**
 * Where the time of a prepared copy of the example batch (S1r) goes on the
 * JavaScript side, beside a plain deep clone of the batch: the check of the
 * batch against the template (reading every value once, the descriptors
 * written), the bulk address reads, making the result (528 DeviceTensors in
 * the mirrored containers, from given results), and the whole
 * start → get; then the same whole for batches that are new arrays each
 * time (a loader's) and for the same arrays every time (a decode loop's).
 * Medians in µs, in one process.
 *
 *   bun bench/prepared_breakdown.ts
 *   deno run --allow-ffi --allow-env --allow-read bench/prepared_breakdown.ts
 *
 * @module
 */

import { forEachLeaf, makeExampleBatch } from "../examples/example_batch.ts";
import { writeAddressesOf } from "../ts/copy/describe.ts";
import { readBatch } from "../ts/copy/prepared_check.ts";
import { commitCache, newBatchRead, newLeafCache } from "../ts/copy/prepared_host.ts";
import { settlePreparedDevice } from "../ts/copy/prepared_result.ts";
import { buildTemplate } from "../ts/copy/prepared_template.ts";
import { Traversal } from "../ts/copy/traversal.ts";
import { library } from "../ts/ffi/library.ts";
import { type DeviceTensor, prepareCopy } from "../ts/mod.ts";
import { plainClone } from "./js_part.ts";
import { CommandLine } from "./cli.ts";

new CommandLine("usage: bun bench/prepared_breakdown.ts (no options): a prepared copy of the example batch split into its phases, medians in µs", {});

const runs = 2000;
const warmUp = 500;

function row(name: string, fn: () => void): void {
  const samples: number[] = [];
  for (let i = 0; i < warmUp + runs; i++) {
    const t0 = performance.now();
    fn();
    if (i >= warmUp) samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  console.log(`${name.padEnd(60)} ${(samples[samples.length >> 1]! * 1000).toFixed(1).padStart(8)} µs`);
}

const batch = makeExampleBatch(1);
const lib = library();
const template = buildTemplate(batch, 0);
const count = template.leaves.length;
const words = new Uint32Array(count * 10);
let views: unknown[] = [];
let places: (object | null)[] = [];
let root: unknown;
// Results as C would give them (one block, packed), without a block to hold.
const results = new Uint32Array(count * 8);
for (let i = 0; i < count; i++) {
  results[i * 8] = 0x1000 + i * 512;
  results[i * 8 + 4] = i * 512;
}

console.log(`${lib.backend.runtime}: the example batch, ${count} leaves`);
row("a plain deep clone of the batch", () => void plainClone(batch));
row("check against the template, descriptors written (no cache)", () => {
  const t = new Traversal(0, { words });
  const r = newBatchRead(t, words, count, null, lib.backend.pointerOf, 0, null);
  root = readBatch(template, batch, r, null);
  views = t.views;
  places = r.places;
});
row("host addresses, eight a C call", () => writeAddressesOf(lib, words, views as never[], count));
const cache = newLeafCache(count);
row("the check again, the same arrays as the last batch (cached)", () => {
  const t = new Traversal(0, { words });
  const r = newBatchRead(t, words, count, null, lib.backend.pointerOf, 0, cache);
  readBatch(template, batch, r, null);
  writeAddressesOf(lib, words, r.bulk, count);
  commitCache(r);
});
row("the result: 528 DeviceTensors placed in the containers", () => void settlePreparedDevice(template, places, root, results, 0));

const touch = (out: unknown) => forEachLeaf(out, (leaf) => void ((leaf as DeviceTensor).shape.length + (leaf as DeviceTensor).address));
using prepared = prepareCopy(batch, "cuda:0");
row("start → get → every leaf read → disposeResult, the same arrays", () => {
  const out = prepared.start(batch).get();
  touch(out);
  prepared.disposeResult(out);
});
const fresh = Array.from({ length: 16 }, (_, i) => makeExampleBatch(i + 2));
let k = 0;
row("the same, a batch of new arrays each time (16 in turn)", () => {
  const out = prepared.start(fresh[k++ % fresh.length]!).get();
  touch(out);
  prepared.disposeResult(out);
});
