// Runs inside the scratch project of install_test.sh: startLoader from the
// installed package, whose workers run the package's own worker script
// (dist/loader_worker.js), copying six batches to cuda:0 (emulated driver).
import { type DeviceTensor, disposeAll, startLoader } from "multi-tensor-copier";

const g = globalThis as unknown as { console: { log(line: string): void } };

const seen: number[] = [];
const loader = startLoader<{ index: number; values: DeviceTensor }>({
  module: new URL("./loader_batches.ts", import.meta.url),
  device: "cuda:0",
  workers: 2,
});
for await (const batch of loader) {
  const values = batch.values.toHost() as Float32Array;
  if (batch.values.device !== "cuda:0" || values[3] !== batch.index) throw new Error(`batch ${batch.index} came back as ${values}`);
  seen.push(batch.index);
  disposeAll(batch);
}
g.console.log(`loader ok: ${seen.join(",")}`);
