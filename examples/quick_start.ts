// The README's first example, runnable from a checkout (after `npm run build:lib`):
//   npx bun examples/quick_start.ts
//   npx deno run --allow-ffi --allow-env --allow-read examples/quick_start.ts
import { cudaUnavailableReason, DeviceTensor, disposeAll, startCopy, Tensor } from "../ts/mod.ts";

const batch = [
  { boxes: new Tensor(new Float32Array(30 * 4), [30, 4]), classes: new BigInt64Array(30), name: "cam0" },
  { boxes: new Tensor(new Float32Array(20 * 4), [20, 4]), classes: new BigInt64Array(20), name: "cam1" },
] as const;                                // a tuple: the result's copied[0] and [1] are known to exist
const noGpu = cudaUnavailableReason();    // undefined, or why CUDA cannot be used here
if (noGpu !== undefined) console.log(`no CUDA device (${noGpu}): copying to cpu`);
const handle = startCopy(batch, noGpu === undefined ? "cuda:0" : "cpu"); // returns at once; the copy runs on C threads
let otherWork = 0;
while (!handle.ready()) otherWork++;       // ready() polls; do useful work here
const copied = await handle;               // or handle.get(), which blocks
const boxes = copied[0].boxes;             // a DeviceTensor on cuda:0; on cpu, the Tensor itself
console.log(boxes instanceof DeviceTensor ? boxes.device : "cpu", boxes.shape, copied[1].name); // cuda:0 [ 30, 4 ] cam1
disposeAll(copied);                        // frees the device memory (garbage collection is the backstop)
handle.dispose();                          // or `using handle = startCopy(...)`
