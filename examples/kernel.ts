// Your own CUDA kernel on data the library copied: a batch goes to cuda:0,
// a small kernel (PTX text, compiled by the driver: examples/kernel_ptx.ts)
// computes y = 2x + 1 for every tensor of it on the GPU, and the results
// come back into host arrays, where they are checked. copyInto into buffers
// made once keeps the host out of the chain: copy, kernel and copy back are
// queued on one stream, and the host waits only for the last. Exits 1 on a
// mismatch.
//   npx bun examples/kernel.ts
//   npx deno run --allow-ffi --allow-env --allow-read examples/kernel.ts
import { copyInto, cudaUnavailableReason, DeviceTensor, disposeAll, Module, Stream, Tensor, withStream } from "../ts/mod.ts";
import { KERNELS_PTX } from "./kernel_ptx.ts";

const runtime = globalThis as unknown as {
  Deno?: { exit(code: number): never };
  process?: { exit(code: number): never };
};
function exitWith(code: number): never {
  if (runtime.Deno) runtime.Deno.exit(code);
  return runtime.process!.exit(code);
}

const DEVICE = "cuda:0";
const noGpu = cudaUnavailableReason();
if (noGpu !== undefined) {
  console.log(`No CUDA device (${noGpu}): this example runs a kernel on one, so there is nothing to do here.`);
  exitWith(0);
}

/** n float32 values that 2x + 1 maps exactly: halves between -20 and 28. */
function values(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => ((i * 7 + seed) % 97) * 0.5 - 20);
}

const batch = [
  { boxes: new Tensor(values(30 * 4, 1), [30, 4]), depths: values(37, 2) },
  { boxes: new Tensor(values(20 * 4, 3), [20, 4]), depths: values(100_000, 4) },
];

using stream = Stream.create(DEVICE);
using module = Module.load(KERNELS_PTX, DEVICE);
const scaleAdd = module.function("scale_add_f32", ["ptr", "ptr", "f32", "f32", "u32"]);

// Device buffers made once, as a program that steps through many batches
// keeps them: the inputs mirror the batch, the outputs one tensor each.
const inputs = batch.map((sample) => ({
  boxes: DeviceTensor.empty(sample.boxes.shape, "float32", DEVICE),
  depths: DeviceTensor.empty([sample.depths.length], "float32", DEVICE),
}));
const flatInputs = inputs.flatMap((sample) => [sample.boxes, sample.depths]);
const outputs = flatInputs.map((x) => DeviceTensor.empty(x.shape, "float32", DEVICE));

// 1. The copy into the input buffers: `stream` waits for it on the GPU. The
//    buffers' addresses are known already, so nothing waits on the host.
const copied = withStream(stream, () => copyInto(batch, inputs));

// 2. The kernel, queued on `stream` behind the copy.
flatInputs.forEach((x, i) => {
  const n = x.byteLength / 4;
  scaleAdd.launch({ stream, grid: Math.ceil(n / 256), block: 256 }, [x, outputs[i]!, 2, 1, n]);
});

// 3. Back into host arrays of our own, read after the kernels (`stream` is
//    current). The host waits once, here, for the whole chain.
const back = outputs.map((y) => new Tensor(new Float32Array(y.byteLength / 4), y.shape));
await withStream(stream, () => copyInto(outputs, back));
await copied;
disposeAll([inputs, outputs]);

const sources = batch.flatMap((sample) => [sample.boxes.data as Float32Array, sample.depths]);
let mismatches = 0;
let checked = 0;
back.forEach((result, i) => {
  const got = result.data as Float32Array;
  const x = sources[i]!;
  for (let j = 0; j < x.length; j++) {
    checked++;
    if (got[j] !== 2 * x[j]! + 1) {
      if (mismatches++ < 5) console.log(`tensor ${i}, element ${j}: ${got[j]}, expected ${2 * x[j]! + 1}`);
    }
  }
});
if (mismatches !== 0) {
  console.log(`${mismatches} of ${checked} values differ`);
  exitWith(1);
}
console.log(`scale_add_f32 ran on ${flatInputs.length} copied tensors (${checked} floats) on ${DEVICE}: every value is 2x + 1`);
