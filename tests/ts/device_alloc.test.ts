// DeviceTensor.empty and DeviceTensor.zeros on the emulated driver (two
// devices): shapes, dtypes and devices, zeros really zero (read back with
// toHost, and new emulated memory reads 0xCD, so empty is not zero by
// chance), dispose and garbage collection free the block, and the errors.
import { DeviceTensor, disposeAll, DTYPES, MtcError, poolStats, startCopy, Tensor } from "../../ts/mod.ts";
import { DTYPE_SIZE } from "../../ts/tensor/dtype.ts";
import { canCollectGarbage, collectGarbage, skipWithoutDriver, tick } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const allocTest = (name: string, fn: () => void | Promise<void>) =>
  test(`device alloc: ${name}`, fn, { skip: skipWithoutDriver });

/** The tensor's bytes, copied back to the host. */
function bytesOf(t: DeviceTensor): Uint8Array {
  const host = t.toTensor();
  return new Uint8Array(host.data.buffer, host.data.byteOffset, host.data.byteLength);
}

allocTest("zeros: every dtype, shapes of 0 to 3 dimensions, both devices", () => {
  const before = poolStats();
  const shapes = [[], [7], [3, 5], [2, 3, 4]];
  const made: DeviceTensor[] = [];
  for (const dtype of DTYPES) {
    for (const shape of shapes) {
      for (const device of ["cuda:0", "cuda:1"] as const) {
        const t = DeviceTensor.zeros(shape, dtype, device);
        made.push(t);
        const count = shape.reduce((a, b) => a * b, 1);
        assertEquals(t.shape, shape);
        assert(Object.isFrozen(t.shape), "the shape is frozen");
        assertSame(t.dtype, dtype);
        assertSame(t.device, device);
        assertSame(t.deviceIndex, device === "cuda:0" ? 0 : 1);
        assertSame(t.byteLength, count * DTYPE_SIZE[dtype]);
        assertSame(t.offset, 0);
        assertSame(t.packed, false);
        assert(t.address > 0 && t.block > 0, "a block of its own");
        assert(bytesOf(t).every((b) => b === 0), `${dtype} [${shape}] on ${device} is zero`);
      }
    }
  }
  const during = poolStats();
  assertSame(during.blocksLive, before.blocksLive + made.length);
  const bytes = made.reduce((sum, t) => sum + t.byteLength, 0);
  assertSame(during.deviceBytesLive, before.deviceBytesLive + bytes);
  assertSame(disposeAll(made), made.length);
  assertSame(poolStats().blocksLive, before.blocksLive);
  assertSame(poolStats().deviceBytesLive, before.deviceBytesLive);
});

allocTest("empty: uninitialized memory of the right size; shape not aliased", () => {
  const shape = [4, 8];
  const t = DeviceTensor.empty(shape, "uint8", "cuda:0");
  shape[0] = 99;
  assertEquals(t.shape, [4, 8]);
  assertSame(t.byteLength, 32);
  // The emulated driver fills new memory with 0xCD: empty did not zero it.
  assert(bytesOf(t).every((b) => b === 0xcd), "empty leaves the memory as it was");
  t.dispose();
  t.dispose();
  assert(t.disposed);
});

allocTest("a written tensor comes back; \"cuda\" is the current device; a device number", () => {
  const z = DeviceTensor.zeros([3], "float32", "cuda");
  assertSame(z.device, "cuda:0");
  z.dispose();
  const n = DeviceTensor.zeros([2], "int64", 1);
  assertSame(n.device, "cuda:1");
  assertEquals(Array.from(n.toHost() as BigInt64Array), [0n, 0n]);
  n.dispose();
});

allocTest("zero elements: no block, address 0, nothing allocated", () => {
  const before = poolStats().blocksLive;
  const t = DeviceTensor.zeros([0, 5], "float64", "cuda:1");
  assertSame(t.address, 0);
  assertSame(t.block, 0);
  assertSame(t.byteLength, 0);
  assertEquals(t.shape, [0, 5]);
  assertSame(poolStats().blocksLive, before);
  t.dispose();
});

allocTest("errors: shape, dtype, device, out of memory; nothing leaks", () => {
  const before = poolStats().blocksLive;
  const bad = (fn: () => unknown, code: string, text: string) => {
    const e = assertThrows(fn, MtcError, text);
    assertSame(e.code, code);
  };
  bad(() => DeviceTensor.zeros([2, -1], "float32", "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", "DeviceTensor.zeros: invalid shape [2, -1]");
  bad(() => DeviceTensor.empty([1.5], "float32", "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", "invalid shape [1.5]");
  bad(() => DeviceTensor.empty("3" as unknown as number[], "float32", "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", "array of integers");
  bad(() => DeviceTensor.zeros([2], "float8" as never, "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", 'unknown dtype "float8"');
  bad(() => DeviceTensor.zeros([2 ** 30, 2 ** 30], "float64", "cuda:0"), "MTC_ERR_INVALID_ARGUMENT", "too large");
  bad(() => DeviceTensor.zeros([2], "float32", "cpu"), "MTC_ERR_INVALID_ARGUMENT", '"cpu" is no CUDA device');
  bad(() => DeviceTensor.zeros([2], "float32", "gpu" as never), "MTC_ERR_INVALID_ARGUMENT", 'invalid device "gpu"');
  bad(() => DeviceTensor.zeros([2], "float32", -1), "MTC_ERR_INVALID_ARGUMENT", "invalid device ordinal -1");
  bad(() => DeviceTensor.zeros([2], "float32", "cuda:7"), "MTC_ERR_NO_DEVICE", "DeviceTensor.zeros:");
  // The emulated devices have 8 GiB each.
  const oom = assertThrows(() => DeviceTensor.empty([16, 2 ** 30], "uint8", "cuda:1"), MtcError, "17179869184 bytes on cuda:1");
  assertSame(oom.code, "MTC_ERR_OUT_OF_MEMORY");
  assert(oom.message.startsWith("DeviceTensor.empty: ") && oom.message.includes("CUDA_ERROR_OUT_OF_MEMORY"), oom.message);
  assertSame(poolStats().blocksLive, before);
});

allocTest("garbage collection frees a dropped tensor's block", async () => {
  if (!canCollectGarbage()) throw new Error("this test needs gc (Bun, or Deno with --v8-flags=--expose-gc)");
  for (let i = 0; i < 3; i++) {
    collectGarbage();
    await tick(1);
  }
  const before = poolStats().blocksLive;
  (() => {
    for (let i = 0; i < 8; i++) DeviceTensor.zeros([256], "float32", "cuda:0");
  })();
  assertSame(poolStats().blocksLive, before + 8);
  for (let round = 0; round < 50 && poolStats().blocksLive > before; round++) {
    collectGarbage();
    await tick(5);
  }
  assertSame(poolStats().blocksLive, before);
});

allocTest("a zeros tensor is a copy source like any other", () => {
  const z = DeviceTensor.zeros([2, 2], "int32", "cuda:0");
  const back = startCopy({ z }, "cpu").get();
  assert(back.z instanceof Tensor);
  assertEquals(Array.from(back.z.data as Int32Array), [0, 0, 0, 0]);
  assertEquals(back.z.shape, [2, 2]);
  disposeAll(back);
  z.dispose();
});

allocTest("a disposed tensor gives out no address; what it was stays readable", async () => {
  const made = DeviceTensor.zeros([4, 2], "float32", "cuda:1");
  const copied = (await startCopy({ v: new Int16Array(6) }, "cuda:0") as unknown as { v: DeviceTensor }).v;
  for (const t of [made, copied]) {
    assert(t.address !== 0, "a live tensor has its address");
    t.dispose();
    const e = assertThrows(() => t.address, MtcError, "was disposed: its address is no longer valid");
    assertSame(e.code, "MTC_ERR_INVALID_STATE");
    assertThrows(() => t.toHost(), MtcError, "disposed");
    assert(t.disposed, "disposed");
    assert(t.shape.length > 0 && typeof t.dtype === "string" && t.device.startsWith("cuda:"), "shape, dtype and device stay readable");
  }
});
