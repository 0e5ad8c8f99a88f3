// The program of install_test.sh's bundles: an app that imports the
// installed package by name and uses the loader, arenas, pinned tensors and
// a kernel from the package's examples (multi-tensor-copier/examples/kernel_ptx),
// on cuda:0 (the emulated driver). Run as it is under Bun and Deno, compiled
// with `bun build --compile`, and built with `bun build --outdir`, from
// another folder. The loader's producer is loader_batches.ts (arena and
// pinned leaves, made on the workers); here, each batch's arena tensor goes
// through scale_add_f32 (y = 2x + 1) into a DeviceTensor, and back into a
// pinned tensor, where it is checked.
import { copyInto, DeviceTensor, disposeAll, Module, pinnedTensor, startLoader, Stream, withStream } from "multi-tensor-copier";
import { KERNELS_PTX } from "multi-tensor-copier/examples/kernel_ptx";
import { expectedValues } from "./loader_batches.ts";

const g = globalThis as unknown as { console: { log(line: string): void } };

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`app: ${message}`);
}

const DEVICE = "cuda:0";
using stream = Stream.create(DEVICE);
using module = Module.load(KERNELS_PTX, DEVICE);
const scaleAdd = module.function("scale_add_f32", ["ptr", "ptr", "f32", "f32", "u32"]);
using back = pinnedTensor("float32", [2, 3]);
const output = DeviceTensor.empty([2, 3], "float32", DEVICE);

const seen: number[] = [];
await using loader = startLoader<{ index: number; arenaTensor: DeviceTensor }>({
  module: new URL("./loader_batches.ts", import.meta.url),
  device: DEVICE,
  workers: 2,
});
for await (const batch of loader) {
  scaleAdd.launch({ stream, grid: 1, block: 32 }, [batch.arenaTensor, output, 2, 1, 6]);
  await withStream(stream, () => copyInto(output, back));
  const want = expectedValues(batch.index, "arenaTensor").map((x) => 2 * x + 1);
  const got = Array.from(back.data as Float32Array);
  check(got.join() === want.join(), `batch ${batch.index}: ${got}, not 2x + 1 = ${want}`);
  seen.push(batch.index);
  disposeAll(batch);
}
output.dispose();
check(seen.join() === "0,1,2,3,4,5", `batches ${seen}`);
g.console.log(`app ok: batches ${seen.join(",")} from the loader (arena and pinned leaves), scale_add_f32 of the package's examples on each: 2x + 1`);
