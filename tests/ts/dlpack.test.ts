// DLPack: DeviceTensors exported as DLManagedTensorVersioned addresses and
// foreign tensors imported as DeviceTensors or host Tensors, with the
// deleter called once. Emulated driver with two devices.
import {
  deleteDLPack,
  DeviceTensor,
  disposeAll,
  type DType,
  fromDLPack,
  MtcError,
  poolStats,
  releaseDLPack,
  startCopy,
  Tensor,
  toDLPack,
} from "../../ts/mod.ts";
import { library } from "../../ts/ffi/library.ts";
import { canCollectGarbage, collectGarbage, skipWithoutDriver, tick } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";
import { bytesOf, DTYPES, elementSize, randomLeaf } from "./random_tensors.ts";

/** A test; `needs` says why it cannot run here (it is then reported as skipped). */
const dlpackTest = (name: string, fn: () => void | Promise<void>, needs?: string) =>
  test(`dlpack: ${name}`, fn, { skip: skipWithoutDriver ?? needs });

const DL_CPU = 1;
const DL_CUDA = 2;
const DL_CUDA_HOST = 3;

/** The fields of a DLManagedTensorVersioned, read from its address. */
interface Managed {
  major: number;
  minor: number;
  hasDeleter: boolean;
  flags: bigint;
  data: number;
  deviceType: number;
  deviceId: number;
  ndim: number;
  code: number;
  bits: number;
  lanes: number;
  shape: number[];
  strides: number[] | null;
  byteOffset: bigint;
}

function read(address: number, into: Uint8Array): void {
  library().backend.copyFromAddress(address, into);
}

function readManaged(address: number): Managed {
  const bytes = new Uint8Array(80);
  read(address, bytes);
  const v = new DataView(bytes.buffer);
  const ndim = v.getInt32(48, true);
  const dims = (at: number): number[] | null => {
    const pointer = Number(v.getBigUint64(at, true));
    if (pointer === 0) return null;
    const values = new BigInt64Array(ndim);
    read(pointer, new Uint8Array(values.buffer));
    return Array.from(values, Number);
  };
  return {
    major: v.getUint32(0, true),
    minor: v.getUint32(4, true),
    hasDeleter: v.getBigUint64(16, true) !== 0n,
    flags: v.getBigUint64(24, true),
    data: Number(v.getBigUint64(32, true)),
    deviceType: v.getInt32(40, true),
    deviceId: v.getInt32(44, true),
    ndim,
    code: v.getUint8(52),
    bits: v.getUint8(53),
    lanes: v.getUint16(54, true),
    shape: dims(56) ?? [],
    strides: dims(64),
    byteOffset: v.getBigUint64(72, true),
  };
}

const CODE: Record<DType, number> = {
  bool: 6, int8: 0, int16: 0, int32: 0, int64: 0, uint8: 1, uint16: 1, uint32: 1, uint64: 1,
  float16: 2, bfloat16: 4, float32: 2, float64: 2, complex64: 5, complex128: 5,
};

/**
 * A DLManagedTensorVersioned written in JavaScript memory, as another
 * library would make one (no deleter). The arrays must outlive its use.
 */
function craft(fields: {
  data: ArrayBufferView | null;
  deviceType?: number;
  deviceId?: number;
  shape: number[];
  strides?: number[];
  code?: number;
  bits?: number;
  major?: number;
}): { address: number; keep: unknown[] } {
  const backend = library().backend;
  const bytes = new Uint8Array(80);
  const v = new DataView(bytes.buffer);
  const shape = BigInt64Array.from(fields.shape, BigInt);
  const strides = fields.strides === undefined ? null : BigInt64Array.from(fields.strides, BigInt);
  v.setUint32(0, fields.major ?? 1, true);
  v.setBigUint64(32, BigInt(fields.data === null ? 0 : backend.pointerOf(fields.data)), true);
  v.setInt32(40, fields.deviceType ?? DL_CPU, true);
  v.setInt32(44, fields.deviceId ?? 0, true);
  v.setInt32(48, fields.shape.length, true);
  v.setUint8(52, fields.code ?? 2);
  v.setUint8(53, fields.bits ?? 32);
  v.setUint16(54, 1, true);
  v.setBigUint64(56, BigInt(fields.shape.length ? backend.pointerOf(shape) : 0), true);
  v.setBigUint64(64, BigInt(strides === null ? 0 : backend.pointerOf(strides)), true);
  return { address: backend.pointerOf(bytes), keep: [bytes, shape, strides, fields.data] };
}

/**
 * Copies a DeviceTensor to the host through the C ABI and exports the
 * pinned host block that holds it (what a C or Python caller would hand
 * over): a managed host tensor owning a block reference.
 */
function pinnedDLPack(source: DeviceTensor, flags: number): number {
  const sym = library().symbols;
  const out = new BigUint64Array(1);
  assertSame(sym.mtc_plan_create(-1, null, out), 0);
  const plan = Number(out[0]);
  const leaf = new DataView(new ArrayBuffer(40));
  leaf.setBigUint64(0, BigInt(source.address), true);
  leaf.setBigUint64(8, BigInt(source.byteLength), true);
  leaf.setInt32(24, source.deviceIndex, true);
  leaf.setUint32(28, elementSize(source.dtype), true);
  assertSame(sym.mtc_plan_add_leaves(plan, leaf, 1), 0);
  assertSame(sym.mtc_plan_submit(plan), 0);
  assertSame(sym.mtc_plan_wait(plan), 0);
  const result = new DataView(new ArrayBuffer(32));
  assertSame(sym.mtc_plan_results(plan, 0, 1, result), 0);
  const dtype = new Uint8Array([CODE[source.dtype], elementSize(source.dtype) * 8, 1, 0]);
  const shape = BigInt64Array.from(source.shape, BigInt);
  const status = sym.mtc_block_to_dlpack!(
    Number(result.getBigUint64(8, true)),
    Number(result.getBigUint64(16, true)),
    shape,
    source.shape.length,
    dtype,
    flags,
    out,
  );
  sym.mtc_plan_release(plan);
  assertSame(status, 0, sym.mtc_last_error());
  return Number(out[0]);
}

function hostBytes(t: DeviceTensor): Uint8Array {
  const back = t.toTensor();
  return bytesOf(back);
}

dlpackTest("toDLPack describes every dtype exactly, and fromDLPack reads it back", () => {
  const inputs = DTYPES.map((dtype, i) => randomLeaf(dtype, [3, 5], 70 + i) as Tensor);
  const onGpu = startCopy(inputs, "cuda:0").get();
  for (let i = 0; i < inputs.length; i++) {
    const t = onGpu[i]!;
    const address = toDLPack(t);
    const m = readManaged(address);
    assertEquals([m.major, m.minor], [1, 1], t.dtype);
    assert(m.hasDeleter, "a deleter");
    assertSame(m.flags, 0n);
    assertSame(m.data, t.address, `${t.dtype}: data is the first element`);
    assertSame(m.byteOffset, 0n);
    assertEquals([m.deviceType, m.deviceId], [DL_CUDA, 0]);
    assertEquals(m.shape, [3, 5]);
    assertEquals(m.strides, [5, 1]);
    assertEquals([m.code, m.bits, m.lanes], [CODE[t.dtype], elementSize(t.dtype) * 8, 1], t.dtype);

    const back = fromDLPack(BigInt(address));
    assert(back instanceof DeviceTensor, "kDLCUDA comes back as a DeviceTensor");
    assertSame(back.address, t.address);
    assertSame(back.dtype, t.dtype);
    assertSame(back.device, "cuda:0");
    assertEquals(back.shape, [3, 5]);
    assertSame(back.byteLength, t.byteLength);
    assertEquals(hostBytes(back), bytesOf(inputs[i]!), `${t.dtype} values`);
    back.dispose();
  }
  disposeAll(onGpu);
});

dlpackTest("the managed tensor keeps the block alive past its DeviceTensors; its deleter frees it once", () => {
  const before = poolStats();
  const onGpu = startCopy({ a: new Float32Array([1, 2, 3]), b: new Int16Array([4, 5]) }, "cuda:0").get();
  assertSame(onGpu.a.block, onGpu.b.block, "packed into one block");
  const a = toDLPack(onGpu.a);
  const b = toDLPack(onGpu.b);
  disposeAll(onGpu);
  assertSame(poolStats().blocksLive, before.blocksLive + 1, "held by the two managed tensors");
  deleteDLPack(a);
  assertSame(poolStats().blocksLive, before.blocksLive + 1, "still held by the other");
  const imported = fromDLPack(b) as DeviceTensor;
  assertEquals(imported.toHost(), new Int16Array([4, 5]));
  imported.dispose();
  imported.dispose(); // idempotent: the deleter runs once
  assertSame(releaseDLPack(imported), false, "already released");
  assertSame(poolStats().blocksLive, before.blocksLive);
  assertSame(poolStats().deviceBytesLive, before.deviceBytesLive);
});

dlpackTest("an imported DeviceTensor is a copy source; the copy keeps it alive until it has read it", () => {
  const before = poolStats().blocksLive;
  const source = startCopy(new Float64Array([1.5, -2.5, 1e300]), "cuda:0").get();
  const imported = fromDLPack(toDLPack(source)) as DeviceTensor;
  source.dispose();
  const handle = startCopy({ x: imported, same: imported }, "cuda:1");
  imported.dispose(); // the copy holds a share: nothing is freed under it
  assertSame(poolStats().blocksLive > before, true);
  const onGpu1 = handle.get();
  handle.dispose();
  assertSame(onGpu1.x.device, "cuda:1");
  assertEquals(onGpu1.x.toHost(), new Float64Array([1.5, -2.5, 1e300]));
  // Already on cuda:1: reused as it is, like any DeviceTensor on the target.
  const again = fromDLPack(toDLPack(onGpu1.same)) as DeviceTensor;
  const reused = startCopy({ again }, "cuda:1").get();
  assertSame(reused.again, again);
  again.dispose();
  disposeAll(onGpu1);
  assertSame(poolStats().blocksLive, before);
});

dlpackTest("host tensors (kDLCPU, kDLCUDAHost) come back as Tensors viewing the memory; releaseDLPack frees it", () => {
  const values = new Int32Array([7, -8, 9, 1 << 30, -1, 0]);
  const onGpu = startCopy(new Tensor(values, [2, 3]), "cuda:0").get();
  for (const [flags, type] of [[0, DL_CPU], [1, DL_CUDA_HOST]]) {
    const before = poolStats().blocksLive;
    const address = pinnedDLPack(onGpu, flags!);
    const m = readManaged(address);
    assertSame(m.deviceType, type);
    assertSame(poolStats().blocksLive, before + 1, "the pinned block lives in the managed tensor");
    const host = fromDLPack(address);
    assert(host instanceof Tensor, "a host Tensor");
    assertEquals(host.shape, [2, 3]);
    assertSame(host.dtype, "int32");
    assertEquals(host.data, values);
    // A view, not a copy: writes go to the managed tensor's memory.
    (host.data as Int32Array)[0] = 42;
    const seen = new Int32Array(1);
    read(m.data, new Uint8Array(seen.buffer));
    assertSame(seen[0], 42);
    const other = new Int32Array(host.data.buffer); // a second view of the same memory
    assertSame(releaseDLPack(host), true);
    assertSame(host.data.length, 0, "emptied");
    assertSame(other.length, 0, "every view emptied");
    assertSame(host.disposed, true, "Tensor#disposed");
    const copied = assertThrows(() => startCopy([host], "cuda:0"), MtcError);
    assertSame(copied.message, "[0]: the Tensor's memory imported with fromDLPack was released (releaseDLPack or disposeAll); it cannot be copied");
    assertSame(releaseDLPack(host), false, "once");
    assertSame(poolStats().blocksLive, before, "the deleter released the block");
  }
  onGpu.dispose();
});

dlpackTest("complex host blocks export as kDLComplex of 64 and 128 bits and come back as complex Tensors", () => {
  for (const [i, dtype] of (["complex64", "complex128"] as const).entries()) {
    const input = randomLeaf(dtype, [4, 3], 90 + i) as Tensor;
    const onGpu = startCopy(input, "cuda:1").get();
    const address = pinnedDLPack(onGpu, 0);
    const m = readManaged(address);
    assertEquals([m.deviceType, m.code, m.bits, m.lanes, m.shape], [DL_CPU, 5, elementSize(dtype) * 8, 1, [4, 3]], dtype);
    const host = fromDLPack(address) as Tensor;
    assertEquals([host.dtype, host.shape, host.size, host.data.length], [dtype, [4, 3], 12, 24], dtype);
    assertSame(host.data.constructor, dtype === "complex64" ? Float32Array : Float64Array, dtype);
    assertEquals(bytesOf(host), bytesOf(input), `${dtype} values`);
    assertSame(releaseDLPack(host), true);
    onGpu.dispose();
  }
});

dlpackTest("disposeAll releases imported host tensors too, once, whether bare or in a Tensor", () => {
  const onGpu = startCopy(new Tensor(new Float32Array([1, 2, 3, 4]), [2, 2]), "cuda:0").get();
  const before = poolStats().blocksLive;
  const asTensor = fromDLPack(pinnedDLPack(onGpu, 0)) as Tensor;
  const bare = (fromDLPack(pinnedDLPack(onGpu, 1)) as Tensor).data;
  assertSame(poolStats().blocksLive, before + 2);
  const batch = { a: asTensor, nested: [bare, new Float32Array(2)], again: asTensor };
  assertSame(disposeAll(batch), 2, "two imports released; the plain array left alone");
  assertSame(asTensor.data.length, 0, "emptied");
  assertSame(bare.length, 0, "emptied");
  assertSame(batch.nested[1]!.length, 2, "not an import: untouched");
  assertSame(poolStats().blocksLive, before, "both deleters ran");
  assertSame(disposeAll(batch), 0, "once");
  onGpu.dispose();
});

dlpackTest("a foreign host tensor made in JavaScript memory: strides NULL or row-major are read in place", () => {
  const data = new Float32Array([0, 1, 2, 3, 4, 5, 6, 7]);
  const dense = craft({ data, shape: [2, 4] });
  const t = fromDLPack(dense.address) as Tensor;
  assertEquals(t.shape, [2, 4]);
  data[5] = 50;
  assertSame((t.data as Float32Array)[5], 50, "the same memory");
  const strided = craft({ data, shape: [2, 1, 4], strides: [4, 99, 1] });
  const s = fromDLPack(strided.address) as Tensor;
  assertEquals(s.shape, [2, 1, 4]);
  const onGpu = startCopy({ t }, "cuda:1").get();
  assertEquals(onGpu.t.toHost(), new Tensor(data.slice(), [2, 4]));
  disposeAll(onGpu);
  const empty = craft({ data: null, shape: [0, 3], code: 0, bits: 64 });
  const e = fromDLPack(empty.address) as Tensor; // nothing to view: released at once
  assertEquals([e.shape, e.dtype, e.data.length], [[0, 3], "int64", 0]);
  assertSame(releaseDLPack(e), false);
  // A managed tensor must stay valid until its deleter ran: release the
  // imports while the crafted structs are still referenced.
  assertSame(releaseDLPack(t) && releaseDLPack(s), true);
  assertSame(dense.keep.length + strided.keep.length + empty.keep.length, 12);
});

dlpackTest("fromDLPack rejects what it cannot view, naming why, and leaves the tensor to its owner", () => {
  const data = new Float32Array(16);
  const cases: [Parameters<typeof craft>[0], string, string][] = [
    [{ data, shape: [4, 4], major: 2 }, "MTC_ERR_UNSUPPORTED", "the tensor is DLPack 2.0; libmtc reads 1.x"],
    [{ data, shape: [4, 4], deviceType: 10 }, "MTC_ERR_UNSUPPORTED", "device type 10 is not one libmtc copies"],
    [{ data, shape: [4, 4], strides: [1, 4] }, "MTC_ERR_UNSUPPORTED", "strides [1, 4] of shape [4, 4] are not row-major contiguous"],
    [{ data, shape: [2, 4], strides: [8, 1] }, "MTC_ERR_UNSUPPORTED", "fromDLPack views dense tensors only"],
    [{ data, shape: [2, 4], strides: [8, 1], deviceType: DL_CUDA }, "MTC_ERR_UNSUPPORTED", "(device tensors must be)"],
    [{ data, shape: [4], code: 5, bits: 32 }, "MTC_ERR_UNSUPPORTED", "DLPack dtype complex of 32 bits has no dtype here"],
    [{ data, shape: [4], code: 2, bits: 12 }, "MTC_ERR_UNSUPPORTED", "dtype float (code 2, bits 12"],
    [{ data, shape: [4, -1] }, "MTC_ERR_INVALID_ARGUMENT", "shape[1] is -1"],
    [{ data: null, shape: [4] }, "MTC_ERR_INVALID_ARGUMENT", "data is NULL but the tensor holds 16 bytes"],
  ];
  for (const [fields, code, text] of cases) {
    const crafted = craft(fields);
    const e = assertThrows(() => fromDLPack(crafted.address), MtcError, text);
    assertSame(e.code, code, text);
    assert(e.message.startsWith("fromDLPack: "), e.message);
  }
  for (const bad of [0, -1, 1.5, 2 ** 60, 2n ** 64n]) {
    assertThrows(() => fromDLPack(bad), MtcError, "is not the address of a DLManagedTensorVersioned");
  }

  // A failed import calls no deleter: a copy of an exported tensor (same
  // deleter and producer state) with a dtype fromDLPack rejects.
  const onGpu = startCopy(new Float32Array([1, 2]), "cuda:0").get();
  const exported = toDLPack(onGpu);
  onGpu.dispose();
  const before = poolStats().blocksLive;
  const copy = new Uint8Array(80);
  read(exported, copy);
  copy[52] = 5; // complex32: libmtc copies it, but no dtype here names it
  copy[53] = 32;
  const copyAddress = library().backend.pointerOf(copy);
  assertThrows(() => fromDLPack(copyAddress), MtcError, "complex of 32 bits");
  assertSame(poolStats().blocksLive, before, "the block is still the caller's");
  deleteDLPack(copyAddress); // the producer's deleter, through the copy: frees the block
  assertSame(poolStats().blocksLive, before - 1);
  assertSame(copy.length, 80, "the copy stayed referenced while C read it");
});

dlpackTest("toDLPack errors: host arrays, empty, disposed and imported tensors", () => {
  assertThrows(() => toDLPack(new Float32Array(2) as unknown as DeviceTensor), MtcError, "toDLPack takes a DeviceTensor");
  const onGpu = startCopy({ a: new Float32Array(0), b: new Uint8Array([1]) }, "cuda:0").get();
  assertThrows(() => toDLPack(onGpu.a), MtcError, "the DeviceTensor is empty (shape [0])");
  const imported = fromDLPack(toDLPack(onGpu.b)) as DeviceTensor;
  assertThrows(() => toDLPack(imported), MtcError, "came from fromDLPack");
  onGpu.b.dispose();
  const e = assertThrows(() => toDLPack(onGpu.b), MtcError, "the DeviceTensor was disposed");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
  assertSame(releaseDLPack(onGpu.a), false, "not imported");
  assertSame(releaseDLPack(new Float32Array(1)), false);
  assertSame(releaseDLPack(imported), true);
});

dlpackTest("imports dropped without release call the deleter after garbage collection", async () => {
  const onGpu = startCopy(new Uint16Array([1, 2, 3, 4]), "cuda:0").get();
  const source = new Tensor(new Int32Array([5, 6]), [2]);
  const onGpu2 = startCopy(source, "cuda:0").get();
  let before = -1;
  for (let i = 0, stable = 0; i < 100 && stable < 3; i++) {
    collectGarbage();
    await tick(2);
    const now = poolStats().blocksLive;
    stable = now === before ? stable + 1 : 0;
    before = now;
  }
  const exported = toDLPack(onGpu);
  onGpu.dispose(); // its block lives in the managed tensor only
  (() => {
    const dev = fromDLPack(exported) as DeviceTensor;
    const host = fromDLPack(pinnedDLPack(onGpu2, 0)) as Tensor;
    assertSame(dev.byteLength + host.data.byteLength, 16);
  })();
  assertSame(poolStats().blocksLive, before + 1, "the pinned block too, until collected");
  for (let i = 0; i < 200 && poolStats().blocksLive !== before - 1; i++) {
    collectGarbage();
    await tick(2);
  }
  assertSame(poolStats().blocksLive, before - 1, "both deleters ran: the pinned block and onGpu's are freed");
  disposeAll([onGpu, onGpu2]);
}, canCollectGarbage() ? undefined : "needs a way to force collections (Deno: --v8-flags=--expose-gc)");
