// complex64 and complex128: interleaved (real, imaginary) pairs in a
// Float32Array or a Float64Array, two array values an element. The host
// path (Tensor checks, cpu → cpu, DLPack views of host memory, errors with
// their leaf path) needs no driver; every direction through the emulated
// driver is checked byte for byte on random data, packed and unpacked, with
// what each result says about itself (dtype, shape, bytes, offsets).
import {
  type DeviceTensor,
  type DType,
  disposeAll,
  fromDLPack,
  isPinnedHostOutput,
  MtcError,
  releaseDLPack,
  startCopy,
  Tensor,
  toDLPack,
  type TypedArray,
} from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { bytesOf, randomLeaf } from "./random_tensors.ts";

const COMPLEX = ["complex64", "complex128"] as const;
type Complex = (typeof COMPLEX)[number];
const SIZE: Record<Complex, number> = { complex64: 8, complex128: 16 };
const STORAGE: Record<Complex, typeof Float32Array | typeof Float64Array> = { complex64: Float32Array, complex128: Float64Array };

const roundUp = (n: number, to: number) => Math.ceil(n / to) * to;

function sameBytes(got: TypedArray | Tensor, expected: TypedArray | Tensor, what: string): void {
  const a = bytesOf(got);
  const e = bytesOf(expected);
  assertSame(a.length, e.length, `${what}: byte length`);
  for (let k = 0; k < a.length; k++) if (a[k] !== e[k]) assertSame(a[k], e[k], `${what}: byte ${k}`);
}

/** A host result of a complex leaf: a Tensor (even 1-D) over the dtype's storage, two values an element. */
function checkHostLeaf(leaf: TypedArray | Tensor, input: Tensor, what: string): void {
  assert(leaf instanceof Tensor, `${what}: a complex result is a Tensor, not a bare ${leaf.constructor.name}`);
  assertSame(leaf.dtype, input.dtype, `${what}: dtype`);
  assertEquals(leaf.shape, input.shape, `${what}: shape`);
  assertSame(leaf.size, input.size, `${what}: size`);
  assertSame(leaf.data.constructor, STORAGE[input.dtype as Complex], `${what}: storage`);
  assertSame(leaf.data.length, 2 * input.size, `${what}: two values an element`);
  assertSame(leaf.byteLength, input.size * SIZE[input.dtype as Complex], `${what}: byteLength`);
  sameBytes(leaf, input, what);
}

// ------------------------------------------------------------ host path

test("complex: a Tensor holds interleaved pairs; its size is half its array's length", () => {
  const c64 = new Tensor(new Float32Array([1, 2, 3, -4, 0.5, 0, -0, 7, 8, 9, 10, 11]), [2, 3], "complex64");
  assertEquals([c64.size, c64.byteLength, c64.dtype, c64.shape], [6, 48, "complex64", [2, 3]]);
  const c128 = new Tensor(new Float64Array(10), [5], "complex128");
  assertEquals([c128.size, c128.byteLength], [5, 80]);
  const scalar = new Tensor(new Float64Array([1e300, -1e-300]), [], "complex128");
  assertEquals([scalar.size, scalar.byteLength], [1, 16]);
  assertSame(new Tensor(new Float32Array(0), [0, 4], "complex64").byteLength, 0);
  // A bare Float32Array, or a Tensor without a dtype, stays float32.
  assertSame(new Tensor(new Float32Array(4), [4]).dtype, "float32");
});

test("complex: wrong storage, odd lengths and wrong shapes are MtcErrors saying which", () => {
  assertThrows(() => new Tensor(new Float64Array(4), [2], "complex64" as DType), MtcError, "a Float64Array cannot store dtype complex64 (use Float32Array)");
  assertThrows(() => new Tensor(new Float32Array(4), [2], "complex128" as DType), MtcError, "a Float32Array cannot store dtype complex128 (use Float64Array)");
  const odd = assertThrows(() => new Tensor(new Float32Array(5), [2], "complex64"), MtcError, "the Float32Array has an odd length, 5");
  assert(odd.message.includes("a complex64 element is 2 values (real, imaginary)"), odd.message);
  assertSame(odd.code, "MTC_ERR_INVALID_ARGUMENT");
  assertThrows(() => new Tensor(new Float64Array(3), [], "complex128"), MtcError, "odd length, 3");
  assertThrows(
    () => new Tensor(new Float32Array(8), [8], "complex64"),
    MtcError,
    "shape [8] has 8 elements but the Float32Array has 4 (8 values, 2 an element of complex64)",
  );
  assertThrows(() => new Tensor(new Float64Array(6), [2, 2], "complex128"), MtcError, "has 4 elements but the Float64Array has 3");
});

test("complex: to cpu, host Tensors are reused as they are", async () => {
  const a = randomLeaf("complex64", [4, 3], 1) as Tensor;
  const b = randomLeaf("complex128", [7], 2) as Tensor;
  const out = await startCopy({ a, nested: [b, 3] }, "cpu");
  assertSame(out.a, a);
  assertSame(out.nested[0], b);
  assertSame(out.nested[1], 3);
});

/** A DLManagedTensorVersioned in JavaScript memory, as a library would make one (no deleter). */
function craftHost(data: Float32Array | Float64Array, shape: number[], bits: number): { address: number; keep: unknown[] } {
  const backend = library().backend;
  const bytes = new Uint8Array(80);
  const v = new DataView(bytes.buffer);
  const dims = BigInt64Array.from(shape, BigInt);
  v.setUint32(0, 1, true); // DLPack 1.x
  v.setBigUint64(32, BigInt(backend.pointerOf(data)), true);
  v.setInt32(40, 1, true); // kDLCPU
  v.setInt32(48, shape.length, true);
  v.setUint8(52, 5); // kDLComplex
  v.setUint8(53, bits);
  v.setUint16(54, 1, true);
  v.setBigUint64(56, BigInt(backend.pointerOf(dims)), true);
  return { address: backend.pointerOf(bytes), keep: [bytes, dims, data] };
}

test("complex: fromDLPack views host kDLComplex tensors of 64 and 128 bits as complex Tensors", () => {
  for (const [dtype, bits] of [["complex64", 64], ["complex128", 128]] as const) {
    const data = new STORAGE[dtype]([1, -2, 3.5, 4, -5, 6, 7, 0]);
    const crafted = craftHost(data, [2, 2], bits);
    const t = fromDLPack(crafted.address) as Tensor;
    assert(t instanceof Tensor, dtype);
    assertEquals([t.dtype, t.shape, t.size, t.byteLength], [dtype, [2, 2], 4, 4 * SIZE[dtype]], dtype);
    assertSame(t.data.constructor, STORAGE[dtype], `${dtype}: storage`);
    assertEquals(Array.from(t.data as Float32Array), [1, -2, 3.5, 4, -5, 6, 7, 0], `${dtype}: (re, im) pairs`);
    data[3] = 40;
    assertSame((t.data as Float32Array)[3], 40, `${dtype}: a view of the same memory`);
    assertSame(releaseDLPack(t), true);
    assertSame(crafted.keep.length, 3);
  }
  const half = craftHost(new Float32Array(4), [4], 32); // complex32: libmtc knows it, no DType names it
  assertThrows(() => fromDLPack(half.address), MtcError, "DLPack dtype complex of 32 bits has no dtype here");
  assertSame(half.keep.length, 3);
});

test("complex: an odd-length array reaching a copy is an error naming the leaf path", () => {
  // A length-tracking view whose resizable buffer grew by one float after the check.
  const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
  const tensor = new Tensor(new Float32Array(buffer), [2], "complex64");
  buffer.resize(20);
  const e = assertThrows(() => startCopy({ cams: [{ phase: tensor }] }, "cuda:0"), MtcError, "odd length, 5");
  assertSame(e.path, ".cams[0].phase");
  assert(e.message.includes("a complex64 element is 2 values (real, imaginary)"), e.message);
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  buffer.resize(24);
  assertThrows(() => startCopy([tensor], "cuda:0"), MtcError, "has 3 elements but its shape [2] needs 2");
  // A data field replaced after construction.
  const forged = new Tensor(new Float64Array(4), [2], "complex128");
  (forged as unknown as { data: TypedArray }).data = new Float64Array(3);
  const f = assertThrows(() => startCopy(new Map([["x", forged]]), "cuda:0"), MtcError, "the Tensor's Float64Array has an odd length, 3");
  assertSame(f.path, '["x"]');
});

// ------------------------------------------------------- emulated driver

const driverTest = (name: string, fn: () => Promise<void>) => test(`complex: ${name}`, fn, { skip: skipWithoutDriver, timeout: 60_000 });

/** Random complex leaves, small (packed) and large (above the 256 KiB threshold: a block of its own). */
function batch(seed: number): { small: Tensor[]; large: Tensor[] } {
  return {
    small: COMPLEX.flatMap((dtype, i) => [
      randomLeaf(dtype, [1 + i], seed + i) as Tensor,
      randomLeaf(dtype, [3, 5], seed + 10 + i) as Tensor,
      randomLeaf(dtype, [], seed + 20 + i) as Tensor,
    ]),
    large: [randomLeaf("complex64", [40_000], seed + 30) as Tensor, randomLeaf("complex128", [150, 120], seed + 31) as Tensor],
  };
}

driverTest("every direction byte-exact: cpu → cuda:0 → cuda:1 → cpu, packed and unpacked", async () => {
  for (const options of [undefined, { packCpuTensors: false }, { usePinnedStaging: false }]) {
    const what = JSON.stringify(options ?? {});
    const { small, large } = batch(100);
    const float = randomLeaf("float32", [7], 50) as Float32Array; // a bare Float32Array between them stays float32
    const inputs = { small, float, large };
    const on0 = await startCopy(inputs, "cuda:0", options);
    const all = [...small, ...large];
    const onGpu = [...on0.small, ...on0.large];
    onGpu.forEach((t, i) => {
      const input = all[i]!;
      assertEquals([t.dtype, t.shape, t.byteLength, t.device], [input.dtype, input.shape, input.byteLength, "cuda:0"], `${what} leaf ${i}`);
      assertSame(t.shape, input.shape, `${what} leaf ${i}: the source's frozen shape, shared`);
      const packs = options?.packCpuTensors !== false;
      assertSame(t.packed, packs && i < small.length, `${what} leaf ${i}: packed`);
    });
    assertEquals([on0.float.dtype, on0.float.shape], ["float32", [7]], `${what}: a bare Float32Array`);
    const on1 = await startCopy(on0, "cuda:1", options);
    [...on1.small, ...on1.large].forEach((t, i) => {
      assertEquals([t.dtype, t.shape, t.byteLength, t.device], [all[i]!.dtype, all[i]!.shape, all[i]!.byteLength, "cuda:1"], `${what} cuda:1 leaf ${i}`);
    });
    const back = await startCopy(on1, "cpu", options);
    [...back.small, ...back.large].forEach((leaf, i) => checkHostLeaf(leaf, all[i]!, `${what} back leaf ${i}`));
    assert(back.float instanceof Float32Array && back.float.length === 7, `${what}: float32 comes back a bare Float32Array`);
    sameBytes(back.float, float, `${what}: float32`);
    disposeAll([on0, on1, back]);
  }
});

driverTest("packed complex leaves start at roundUp(max(a, element size), element size), for any alignment", async () => {
  for (const alignment of [1, 3, 6, 16, 100]) {
    // Mixed with 1- and 2-byte leaves of odd lengths, so each complex leaf starts after an odd end.
    const inputs = [
      randomLeaf("uint8", [3], 1), randomLeaf("complex64", [3], 2), randomLeaf("int16", [5], 3), randomLeaf("complex128", [2], 4),
      randomLeaf("bool", [7], 5), randomLeaf("complex128", [1], 6), randomLeaf("complex64", [5, 1], 7),
    ];
    const onGpu = (await startCopy(inputs, "cuda:0", { minPackedAlignmentBytes: alignment })) as DeviceTensor[];
    let end = 0;
    onGpu.forEach((t, i) => {
      assert(t.packed && t.block === onGpu[0]!.block, `alignment ${alignment} leaf ${i}: packed in one block`);
      const size = t.dtype === "complex128" ? 16 : t.dtype === "complex64" ? 8 : t.dtype === "int16" ? 2 : 1;
      const offset = i === 0 ? 0 : roundUp(end, roundUp(Math.max(alignment, size), size));
      assertSame(t.offset - onGpu[0]!.offset, offset, `alignment ${alignment}, leaf ${i} (${t.dtype}): its offset`);
      end = offset + t.byteLength;
    });
    const back = (await startCopy(onGpu, "cpu")) as (TypedArray | Tensor)[];
    back.forEach((leaf, i) => sameBytes(leaf, inputs[i]!, `alignment ${alignment}, leaf ${i}`));
    disposeAll([onGpu, back]);
  }
});

driverTest("results on cpu: pinned views by default, JavaScript-owned with usePinnedStaging false; toHost owns its copy", async () => {
  const { small, large } = batch(300);
  const all = [...small, ...large];
  const onGpu = (await startCopy(all, "cuda:0")) as DeviceTensor[];
  for (const pinned of [true, false]) {
    const handle = startCopy(onGpu, "cpu", { usePinnedStaging: pinned });
    const back = (await handle) as (TypedArray | Tensor)[];
    handle.dispose();
    back.forEach((leaf, i) => {
      checkHostLeaf(leaf, all[i]!, `usePinnedStaging ${pinned}, leaf ${i}`);
      assertSame(isPinnedHostOutput(leaf), pinned, `usePinnedStaging ${pinned}, leaf ${i}: a view of pinned memory`);
    });
    disposeAll(back);
  }
  onGpu.forEach((t, i) => {
    const host = t.toHost();
    checkHostLeaf(host, all[i]!, `toHost leaf ${i}`);
    assert(!isPinnedHostOutput(host), `toHost leaf ${i}: owned`);
    const tensor = t.toTensor();
    assertEquals([tensor.dtype, tensor.shape, tensor.size], [all[i]!.dtype, all[i]!.shape, all[i]!.size], `toTensor leaf ${i}`);
  });
  // Interleaving is kept: element k is (data[2k], data[2k + 1]).
  const known = new Tensor(new Float64Array([1, 2, -3, 4.25, 0, -1]), [3], "complex128");
  const [viaGpu] = (await startCopy([known], "cuda:1")) as DeviceTensor[];
  assertEquals(Array.from((viaGpu!.toHost() as Tensor).data as Float64Array), [1, 2, -3, 4.25, 0, -1]);
  disposeAll([onGpu, viaGpu]);
});

driverTest("DLPack round trip: kDLComplex of 64 and 128 bits out, the same tensor back", async () => {
  const { small, large } = batch(500);
  const all = [...small, ...large];
  const onGpu = (await startCopy(all, "cuda:0")) as DeviceTensor[];
  for (const [i, t] of onGpu.entries()) {
    const address = toDLPack(t);
    const header = new Uint8Array(80);
    library().backend.copyFromAddress(address, header);
    const v = new DataView(header.buffer);
    assertEquals([v.getUint8(52), v.getUint8(53), v.getUint16(54, true)], [5, SIZE[t.dtype as Complex] * 8, 1], `leaf ${i}: code, bits, lanes`);
    assertSame(Number(v.getBigUint64(32, true)) % SIZE[t.dtype as Complex], 0, `leaf ${i}: data aligned to the element`);
    const back = fromDLPack(address) as DeviceTensor;
    assertEquals([back.dtype, back.shape, back.byteLength, back.address], [t.dtype, t.shape, t.byteLength, t.address], `leaf ${i}`);
    checkHostLeaf(back.toHost(), all[i]!, `leaf ${i} through DLPack`);
    back.dispose();
  }
  disposeAll(onGpu);
});
