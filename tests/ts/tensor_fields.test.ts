// A Tensor's fields changed after its constructor checked them are refused
// by every copy, with the leaf's path, and nothing is copied: data of
// another kind put in its place (its bytes would be taken as the dtype: an
// Int32Array of 7s copied as float32 9.8e-45), and an offset given to a
// Tensor without strides (its data starts at element 0, so the offset
// would be ignored). startCopy to a device and to the host (copyHostLeaves),
// copyInto's source, and prepareCopy's sample and batches.
import { copyInto, DeviceTensor, MtcError, prepareCopy, startCopy, Tensor } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assertSame, assertThrows, test } from "./harness.ts";

const fieldsTest = (name: string, fn: () => void | Promise<void>) => test(`tensor fields: ${name}`, fn, { skip: skipWithoutDriver });

/** Expects MTC_ERR_INVALID_ARGUMENT at `path` whose message includes `includes`. */
function refused(fn: () => unknown, includes: string, path: string): void {
  const e = assertThrows(fn, MtcError, includes);
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
  assertSame(e.path, path, e.message);
}

/** A float32 Tensor of [2, 4] whose data is then replaced by `data`. */
function swapped(data: unknown): Tensor<"float32", Float32Array<ArrayBuffer>> {
  const t = new Tensor(new Float32Array(8), [2, 4], "float32");
  (t as { data: unknown }).data = data;
  return t;
}

/** A dense float32 Tensor of [8] given an offset afterwards. */
function offsetBy(offset: number): Tensor<"float32", Float32Array<ArrayBuffer>> {
  const t = new Tensor(new Float32Array(8), [8], "float32");
  (t as { offset: number }).offset = offset;
  return t;
}

const STORAGE = "cannot store its dtype float32";
const OFFSET = "has no strides but its offset is 4";

fieldsTest("startCopy refuses replaced data of every other kind, and a dense Tensor's offset, to a device and to the host", () => {
  for (const data of [new Int32Array(8).fill(7), new Uint8Array(32), new BigInt64Array(4)]) {
    refused(() => startCopy({ x: swapped(data) }, "cuda:0"), STORAGE, ".x");
    refused(() => startCopy({ x: swapped(data) }, "cpu", { copyHostLeaves: true }), STORAGE, ".x");
  }
  refused(() => startCopy({ y: [offsetBy(4)] }, "cuda:0"), OFFSET, ".y[0]");
  refused(() => startCopy({ y: [offsetBy(4)] }, "cpu", { copyHostLeaves: true }), OFFSET, ".y[0]");
  // The same Tensors unchanged copy as ever.
  const fine = new Tensor(new Float32Array(8).fill(1.5), [2, 4]);
  const onGpu = startCopy({ x: fine }, "cuda:0").get();
  assertSame((onGpu.x.toTensor().data as Float32Array)[7], 1.5);
  onGpu.x.dispose();
});

fieldsTest("copyInto refuses such a source", async () => {
  using destination = DeviceTensor.zeros([2, 4], "float32", "cuda:0");
  refused(() => copyInto({ x: swapped(new Int32Array(8)) }, { x: destination }), STORAGE, ".x");
  using line = DeviceTensor.zeros([8], "float32", "cuda:0");
  refused(() => copyInto({ x: offsetBy(4) }, { x: line }), OFFSET, ".x");
  await copyInto({ x: new Tensor(new Float32Array(8), [2, 4]) }, { x: destination });
});

fieldsTest("prepareCopy refuses such a sample, and such a leaf in a batch of a good sample", () => {
  refused(() => prepareCopy({ x: swapped(new Int32Array(8)) }, "cuda:0"), STORAGE, ".x");
  refused(() => prepareCopy({ x: offsetBy(4) }, "cuda:0"), OFFSET, ".x");
  using prepared = prepareCopy({ x: swapped(new Float32Array(8)), y: offsetBy(0) }, "cuda:0");
  refused(() => prepared.start({ x: swapped(new Int32Array(8)), y: offsetBy(0) }), STORAGE, ".x");
  const e = assertThrows(() => prepared.start({ x: swapped(new Float32Array(8)), y: offsetBy(4) }), MtcError, "its offset was 0 in the sample, 4 now");
  assertSame(e.path, ".y", e.message);
});
