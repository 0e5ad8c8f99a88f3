// complex64 and complex128 on the GPU: random (real, imaginary) pairs in
// every direction, byte for byte, small leaves packed and large ones staged
// in pieces, with what each result says about itself.
import {
  DeviceTensor,
  disposeAll,
  fromDLPack,
  hasKernels,
  isPinnedHostOutput,
  startCopy,
  Tensor,
  toDLPack,
  type TypedArray,
} from "../../ts/mod.ts";
import { assert, assertEquals, assertSame, note } from "../ts/harness.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";
import { bytesOf, elementSize, randomLeaf } from "../ts/random_tensors.ts";

const COMPLEX = ["complex64", "complex128"] as const;

/** Small leaves (packed), one above the packing threshold, and one over two 8 MiB staging pieces, of each complex dtype. */
function complexBatch(seed: number): Tensor[] {
  return COMPLEX.flatMap((dtype, i) => [
    randomLeaf(dtype, [1], seed + i) as Tensor,
    randomLeaf(dtype, [17, 3], seed + 10 + i) as Tensor,
    randomLeaf(dtype, [], seed + 20 + i) as Tensor,
    randomLeaf(dtype, [300, 200], seed + 30 + i) as Tensor, // 480 KiB / 960 KiB: a block of its own
    randomLeaf(dtype, [(18 << 20) / elementSize(dtype)], seed + 40 + i) as Tensor, // 18 MiB: three pieces
  ]);
}

function same(got: TypedArray | Tensor, input: Tensor, what: string): void {
  assert(got instanceof Tensor, `${what}: a complex result is a Tensor`);
  assertEquals([got.dtype, got.shape, got.size, got.data.length], [input.dtype, input.shape, input.size, 2 * input.size], what);
  assertSame(got.data.constructor, input.data.constructor, `${what}: storage`);
  const a = bytesOf(got);
  const e = bytesOf(input);
  assertSame(a.length, e.length, `${what}: bytes`);
  for (let k = 0; k < a.length; k++) if (a[k] !== e[k]) assertSame(a[k], e[k], `${what}: byte ${k}`);
}

function checkOnDevice(out: DeviceTensor[], inputs: Tensor[], device: string, what: string): void {
  out.forEach((t, i) => {
    const input = inputs[i]!;
    assert(t instanceof DeviceTensor, `${what} leaf ${i}`);
    assertEquals([t.device, t.dtype, t.shape, t.byteLength], [device, input.dtype, input.shape, input.byteLength], `${what} leaf ${i}`);
    assertSame(t.address % elementSize(t.dtype), 0, `${what} leaf ${i}: aligned to its ${elementSize(t.dtype)}-byte element`);
  });
}

gpuTest("complex: host → device → host exact, packed and unpacked, pinned and pageable, every option set", async () => {
  const inputs = complexBatch(7000);
  for (const options of [undefined, { packCpuTensors: false }, { usePinnedStaging: false }]) {
    const what = JSON.stringify(options ?? {});
    const onGpu = (await startCopy(inputs, DEVICE, options)) as DeviceTensor[];
    checkOnDevice(onGpu, inputs, DEVICE, what);
    onGpu.forEach((t, i) => assertSame(t.packed, options?.packCpuTensors !== false && inputs[i]!.byteLength <= 256 << 10, `${what} leaf ${i}: packed`));
    const handle = startCopy(onGpu, "cpu", options);
    const back = (await handle) as (TypedArray | Tensor)[];
    note(`gpu: complex device → host path (${what}): ${handle.stats().deviceToHostPath}`);
    handle.dispose();
    back.forEach((leaf, i) => {
      same(leaf, inputs[i]!, `${what} back leaf ${i}`);
      assertSame(isPinnedHostOutput(leaf), options?.usePinnedStaging !== false, `${what} leaf ${i}: pinned view or owned`);
    });
    onGpu.forEach((t, i) => same(t.toHost(), inputs[i]!, `${what} toHost leaf ${i}`));
    disposeAll([onGpu, back]);
  }
});

gpuTest("complex: 400 small leaves back to the host in one gather, exact", async () => {
  const inputs = Array.from({ length: 400 }, (_, i) => randomLeaf(COMPLEX[i % 2]!, [1 + (i % 9), 1 + (i % 4)], 8000 + i) as Tensor);
  const onGpu = (await startCopy(inputs, DEVICE)) as DeviceTensor[];
  checkOnDevice(onGpu, inputs, DEVICE, "small");
  assert(onGpu.every((t) => t.packed && t.block === onGpu[0]!.block), "all packed in one block");
  const handle = startCopy(onGpu, "cpu");
  const back = (await handle) as (TypedArray | Tensor)[];
  if (hasKernels()) assertSame(handle.stats().deviceToHostPath, "gather-kernel");
  handle.dispose();
  back.forEach((leaf, i) => same(leaf, inputs[i]!, `small leaf ${i}`));
  disposeAll([onGpu, back]);
});

gpuTest("complex: device → device, reused on the same device", async () => {
  const inputs = complexBatch(9000);
  const on0 = (await startCopy(inputs, "cuda:0")) as DeviceTensor[];
  const again = (await startCopy(on0, "cuda:0")) as DeviceTensor[];
  again.forEach((t, i) => assertSame(t, on0[i], `leaf ${i}: reused on its own device`));
  disposeAll(on0);
});

gpuTest("complex: cuda:0 → cuda:1 and back", async () => {
  const inputs = complexBatch(9000);
  const on0 = (await startCopy(inputs, "cuda:0")) as DeviceTensor[];
  const on1 = (await startCopy(on0, "cuda:1")) as DeviceTensor[];
  checkOnDevice(on1, inputs, "cuda:1", "cuda:1");
  on1.forEach((t, i) => same(t.toHost(), inputs[i]!, `cuda:1 leaf ${i}`));
  const back0 = (await startCopy(on1, "cuda:0")) as DeviceTensor[];
  back0.forEach((t, i) => same(t.toHost(), inputs[i]!, `cuda:1 → cuda:0 leaf ${i}`));
  disposeAll([on0, on1, back0]);
}, { gpus: 2 });

gpuTest("complex: DLPack export is kDLComplex 64/128 and imports back as the same tensor, exact", async () => {
  const inputs = complexBatch(9500).filter((t) => t.byteLength <= 1 << 20);
  const onGpu = (await startCopy(inputs, DEVICE)) as DeviceTensor[];
  onGpu.forEach((t, i) => {
    const back = fromDLPack(toDLPack(t));
    assert(back instanceof DeviceTensor, `leaf ${i}`);
    assertEquals([back.dtype, back.shape, back.address, back.byteLength], [t.dtype, t.shape, t.address, t.byteLength], `leaf ${i}`);
    same(back.toHost(), inputs[i]!, `leaf ${i} through DLPack`);
    back.dispose();
  });
  disposeAll(onGpu);
});
