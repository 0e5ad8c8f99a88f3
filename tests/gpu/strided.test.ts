// Strided host tensors on the GPU: copied dense to the device, the small
// ones packed into the chunk of the dense leaves beside them, the large ones
// (an HWC image read as CHW, 24 MiB: staged in pieces over the staging
// threads) in blocks of their own; every dtype and kind of layout, byte for
// byte after the round trip.
import { type DeviceTensor, disposeAll, startCopy, Tensor } from "../../ts/mod.ts";
import { assert, assertSame } from "../ts/harness.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";
import { batch, checkDense, THRESHOLD } from "../ts/strided_tensors.ts";
import { randomLeaf } from "../ts/random_tensors.ts";

gpuTest("strided tensors of every dtype and layout copy dense, small ones packed", async () => {
  const input = batch();
  for (const usePinnedStaging of [true, false]) {
    const out = (await startCopy(input, DEVICE, { packThresholdBytes: THRESHOLD, usePinnedStaging })) as Record<string, DeviceTensor>;
    for (const [name, t] of Object.entries(input)) {
      if (t.size > 0) assertSame(out[name]!.packed, name.endsWith("small"), `${name}: packed`);
      checkDense(out[name]!.toTensor(), t, `${DEVICE} (pinned staging ${usePinnedStaging}) ${name}`);
    }
    disposeAll(out);
  }
});

gpuTest("an HWC image read as CHW (24 MiB, staged in pieces) and strided leaves packed with dense ones", async () => {
  const [h, w, c] = [1080, 1920, 3];
  const hwc = (randomLeaf("float32", [h * w * c], 77) as Float32Array);
  const chw = new Tensor(hwc, [c, h, w], "float32", { strides: [1, w * c, c] });
  const dense = randomLeaf("int32", [64, 3], 78) as Tensor;
  const column = new Tensor(hwc, [h, 1], "float32", { strides: [w * c, 1], offset: 2 });
  const broadcast = new Tensor(new Float32Array([1.5, -2.5]), [100, 2], "float32", { strides: [0, 1] });
  const batchOf = { chw, small: [dense, column, broadcast] };
  const out = await startCopy(batchOf, DEVICE);
  assert(!out.chw.packed, "the image has a block of its own");
  for (const t of out.small) assert(t.packed, "small strided leaves are packed");
  assertSame(out.small[1]!.block, out.small[0]!.block, "a strided leaf shares the dense leaf's chunk");
  assertSame(out.small[2]!.block, out.small[0]!.block, "a broadcast leaf shares the dense leaf's chunk");
  checkDense(out.chw.toTensor(), chw, "CHW image");
  checkDense(out.small[1]!.toTensor(), column, "column");
  checkDense(out.small[2]!.toTensor(), broadcast, "broadcast");
  const back = (await startCopy(batchOf, "cpu")) as typeof batchOf;
  checkDense(back.chw, chw, "CHW image on the host");
  assertSame(back.small[0], dense, "a dense host leaf is reused on the host");
  disposeAll([out, back]);
});
