// Runs inside the scratch project of install_test.sh, which installed the
// package a second time in second/: both copies in one program hand out the
// classes of the one loaded first, so the second's pinned tensors and arenas
// are copied by the first's startCopy as its own, read where they lie.
import * as first from "multi-tensor-copier";
import * as second from "./second/node_modules/multi-tensor-copier/dist/mod.js";

const g = globalThis as unknown as { console: { log(line: string): void } };

for (const name of Object.keys(first)) {
  if ((second as Record<string, unknown>)[name] !== (first as Record<string, unknown>)[name]) throw new Error(`two installs: the second's ${name} is not the first's`);
}
const arena = second.Arena.create(1 << 16);
const ids = arena.array("int32", 3);
ids.set([1, 2, 3]);
const boxes = second.pinnedTensor("float32", [2]);
(boxes.data as Float32Array).set([0.5, 1.5]);
const handle = first.startCopy({ ids, boxes }, "cuda:0");
const onGpu = await handle;
const back = [...(onGpu.ids.toHost() as Int32Array), ...(onGpu.boxes.toTensor().data as Float32Array)];
if (back.join() !== "1,2,3,0.5,1.5" || handle.stats().leavesDirect !== 2) {
  throw new Error(`two installs: ${back} copied, ${handle.stats().leavesDirect} leaves read in place`);
}
first.disposeAll([onGpu, boxes]);
arena.dispose();
g.console.log(`two installs: one set of classes (${Object.keys(first).length} exports); the second's arena and pinned tensor read in place`);
