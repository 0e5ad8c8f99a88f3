// Strided host tensors (a Tensor with strides and an offset) are copied
// dense: to "cpu" (the host path) and to cuda:0 on the emulated driver,
// pinned and pageable staging. Transpose, column slice, step slice,
// broadcast (stride 0), 0-size and 5-d layouts of every dtype, each small
// (packed with the other small leaves) and large (past the packing
// threshold: a block of its own), byte for byte against a dense image
// computed here. Bad layouts are errors: at construction, and at the copy
// (naming the leaf path) for fields changed afterwards.
import { type DeviceTensor, disposeAll, MtcError, startCopy, Status, Tensor, type TypedArray } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertSame, assertThrows, test } from "./harness.ts";
import { batch, checkDense, THRESHOLD } from "./strided_tensors.ts";

test("strided tensors: layouts are checked and dense ones stay dense", () => {
  const data = new Float32Array(12);
  const bad = (layout: { strides?: number[]; offset?: number }, shape: number[], includes: string) => {
    const e = assertThrows(() => new Tensor(data, shape, "float32", layout), MtcError, includes);
    assertSame(e.status, Status.MTC_ERR_INVALID_ARGUMENT);
  };
  bad({ strides: [1, -1] }, [2, 2], "strides must be integers >= 0");
  bad({ strides: [1.5, 1] }, [2, 2], "strides must be integers >= 0");
  bad({ strides: [1] }, [2, 2], "have 1 entries but the shape [2, 2] has 2");
  bad({ strides: [1, 4], offset: -1 }, [2, 2], "invalid offset -1");
  bad({ strides: [1, 4], offset: 0.5 }, [2, 2], "invalid offset 0.5");
  bad({ strides: [1, 6] }, [2, 3], "reads element 13, outside the 12-element storage");
  bad({ strides: [0, 0], offset: 12 }, [2, 3], "reads element 12");
  bad({ offset: 1 }, [12], "reads element 12");
  bad({ strides: [1], offset: 13 }, [0], "offset 13 is past the end");
  // Dense strides (extents of 1 step anywhere): a plain dense tensor over the elements read.
  const dense = new Tensor(data, [2, 1, 3], "float32", { strides: [3, 99, 1], offset: 5 });
  assertSame(dense.strides, undefined);
  assertSame(dense.data.length, 6);
  assertSame(dense.data.byteOffset, 20);
  const empty = new Tensor(data, [3, 0], "float32", { strides: [5, 5], offset: 12 });
  assertSame(empty.strides, undefined);
  assertSame(empty.data.length, 0);
  const strided = new Tensor(data, [3, 2], "float32", { strides: [1, 6] });
  assert(Object.isFrozen(strided.strides), "strides are frozen");
  assertSame(strided.byteLength, 24, "byteLength is that of the dense copy");
  assertSame(strided.data, data, "a strided tensor keeps its storage");
});

test("strided tensors: copied dense to cpu, packed and unpacked, pageable results too, every dtype", async () => {
  const input = batch();
  for (const [pack, usePinnedStaging] of [[true, true], [false, true], [true, false]]) {
    const handle = startCopy(input, "cpu", { packThresholdBytes: THRESHOLD, packCpuTensors: pack, usePinnedStaging });
    const out = (await handle) as Record<string, Tensor>;
    for (const [name, t] of Object.entries(input)) checkDense(out[name]!, t, `cpu (packed ${pack}, pinned ${usePinnedStaging}) ${name}`);
    const stats = handle.stats();
    const small = Object.entries(input).filter(([name, t]) => name.endsWith("small") && t.size > 0).length;
    assertSame(stats.leavesPacked, pack ? small : 0, "the small strided leaves are packed");
    handle.dispose();
  }
  // A dense layout is reused on the host, as any dense tensor.
  const dense = new Tensor(new Int16Array(10), [2, 4], "int16", { strides: [4, 1], offset: 1 });
  const same = (await startCopy({ dense }, "cpu")) as { dense: Tensor };
  assertSame(same.dense, dense);
});

test("strided tensors: copied dense to cuda:0, packed and unpacked, pinned and pageable staging", async () => {
  const input = batch();
  for (const usePinnedStaging of [true, false]) {
    const out = (await startCopy(input, "cuda:0", { packThresholdBytes: THRESHOLD, usePinnedStaging })) as Record<string, DeviceTensor>;
    for (const [name, t] of Object.entries(input)) {
      const d = out[name]!;
      if (t.size > 0) assertSame(d.packed, name.endsWith("small"), `${name}: packed`);
      checkDense(d.toTensor(), t, `cuda:0 (pinned ${usePinnedStaging}) ${name}`);
    }
    disposeAll(out);
  }
}, { skip: skipWithoutDriver });

test("strided tensors: a layout changed after construction is an error naming the leaf", async () => {
  const t = new Tensor(new Float64Array(20), [4, 5], "float64", { strides: [1, 4] });
  const grown = new Tensor(new Float64Array(20), [4, 5], "float64", { strides: [1, 4] });
  (grown as unknown as { data: TypedArray }).data = new Float64Array(10);
  let e = assertThrows(() => startCopy({ ok: [t], cams: [t, { depth: grown }] }, "cpu"), MtcError, "cams[1].depth");
  assert(e.message.includes("reads element 19, outside the 10-element storage"), e.message);
  assertSame(e.path, ".cams[1].depth");
  const negative = new Tensor(new Float64Array(20), [4, 5], "float64", { strides: [1, 4] });
  (negative as unknown as { strides: number[] }).strides = [1, -4];
  e = assertThrows(() => startCopy([negative], "cpu"), MtcError, "[0]: invalid strides [1, -4]");
  const deep = new Tensor(new Uint8Array(1 << 9), new Array(9).fill(2), "uint8", { strides: new Array(9).fill(1) });
  e = assertThrows(() => startCopy({ deep }, "cpu"), MtcError, "deep: a strided Tensor may have at most 8 dimensions of extent > 1");
  // Dimensions of extent 1 do not count towards the 8.
  const tall = new Tensor(new Uint8Array(256), [2, 1, 2, 2, 1, 2, 2, 2, 2, 1, 2], "uint8", { strides: [1, 0, 2, 4, 0, 8, 16, 32, 64, 0, 128] });
  const back = (await startCopy({ tall }, "cpu")) as { tall: Tensor };
  checkDense(back.tall, tall, "11-d with three extents of 1");
});
