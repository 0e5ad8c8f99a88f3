// The caller's own kernels (Module, Kernel, settleLaunches) on the emulated
// driver (two devices): modules from PTX text and bytes, lookups, the bytes
// each launch hands the driver (read back from what the emulation recorded,
// each parameter as its .entry declares it), argument checks against the
// declared signature, the driver's errors, and tensors kept alive until
// their stream has passed the launch. The emulation runs add_one_f32 and
// scale_add_f32 on the host (examples/kernel_ptx.ts has their PTX).
import { DeviceTensor, Kernel, Module, MtcError, poolStats, settleLaunches, Stream } from "../../ts/mod.ts";
import { KERNELS_PTX } from "../../examples/kernel_ptx.ts";
import { fakeDriver, skipWithoutDriver, withCopyDelay } from "./fake_driver.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const kernelTest = (name: string, fn: () => void | Promise<void>) =>
  test(`kernels: ${name}`, fn, { skip: skipWithoutDriver });

/** A kernel that only records its launches: one parameter of each type. */
const RECORDING_PTX = `
.version 8.0
.target sm_80
.address_size 64
.visible .entry every_type(.param .u64 t, .param .s32 a, .param .u32 b, .param .s64 c,
  .param .u64 d, .param .f32 e, .param .f64 f, .param .u64 raw, .param .u64 none) { ret; }
.visible .entry no_params() { ret; }
`;
const EVERY_TYPE = ["ptr", "i32", "u32", "i64", "u64", "f32", "f64", "ptr", "ptr"] as const;

function lastLaunch() {
  const launch = fakeDriver()?.lastLaunch();
  if (launch === null || launch === undefined) throw new Error("the emulated driver recorded no launch");
  return launch;
}

function floats(t: DeviceTensor): number[] {
  return Array.from(t.toHost() as Float32Array);
}

kernelTest("modules from a string, bytes and an ArrayBuffer; lookups; dispose", () => {
  const bytes = new TextEncoder().encode(KERNELS_PTX);
  for (const image of [KERNELS_PTX, bytes, bytes.buffer.slice(0) as ArrayBuffer]) {
    const module = Module.load(image, "cuda:1");
    assertSame(module.device, "cuda:1");
    assertSame(module.deviceIndex, 1);
    const k = module.function("add_one_f32", ["ptr", "u32"]);
    assert(k instanceof Kernel);
    assertSame(k.name, "add_one_f32");
    assertEquals(k.params, ["ptr", "u32"]);
    assertSame(k.module, module);
    module.dispose();
    module.dispose();
    assert(module.disposed);
    const e = assertThrows(() => module.function("add_one_f32", ["ptr", "u32"]), MtcError, "was disposed");
    assertSame(e.code, "MTC_ERR_INVALID_STATE");
  }
  using current = Module.load(KERNELS_PTX); // "cuda": the current device
  assertSame(current.device, "cuda:0");
});

kernelTest("bad images, missing kernels and bad declarations are MtcErrors", () => {
  const bad = assertThrows(() => Module.load("this is no module", "cuda:0"), MtcError, "CUDA_ERROR_INVALID_IMAGE");
  assertSame(bad.code, "MTC_ERR_CUDA");
  assert(bad.message.startsWith("Module.load: ") && bad.message.includes("cuda:0"), bad.message);
  assertThrows(() => Module.load(new Uint8Array([1, 2, 3, 4]), "cuda:0"), MtcError, "CUDA_ERROR_INVALID_IMAGE");
  assertThrows(() => Module.load("", "cuda:0"), MtcError, "the image is empty");
  const jit = assertThrows(() => Module.load(KERNELS_PTX.replace("sm_80", "sm_120"), "cuda:1"), MtcError, "CUDA_ERROR_INVALID_PTX");
  assert(jit.message.includes("the JIT compiler says: ptxas application ptx input: fatal: .target sm_120 is newer"), jit.message);
  assertThrows(() => Module.load(42 as never, "cuda:0"), MtcError, "PTX text");
  assertThrows(() => Module.load(KERNELS_PTX, "cpu"), MtcError, '"cpu"');
  assertSame(assertThrows(() => Module.load(KERNELS_PTX, "cuda:9"), MtcError).code, "MTC_ERR_NO_DEVICE");

  using module = Module.load(KERNELS_PTX, "cuda:0");
  const missing = assertThrows(() => module.function("add_two_f32", ["ptr"]), MtcError, "CUDA_ERROR_NOT_FOUND");
  assertSame(missing.code, "MTC_ERR_CUDA");
  assert(missing.message.includes('"add_two_f32"'), missing.message);
  assertThrows(() => module.function("add_one_f32", ["ptr", "int"] as never), MtcError, 'parameter 1 has type "int"');
  assertThrows(() => module.function("", []), MtcError, "non-empty string");
});

kernelTest("every parameter type reaches the driver byte for byte", () => {
  using stream = Stream.create("cuda:0");
  using module = Module.load(RECORDING_PTX, "cuda:0");
  const k = module.function("every_type", EVERY_TYPE);
  using t = DeviceTensor.zeros([16], "float32", "cuda:0");
  const raw = 0x7f12_3456_7890n;
  k.launch({ stream, grid: [3, 2, 5], block: [32, 4], sharedBytes: 1024 }, [
    t, -5, 0xffff_fffe, -(2n ** 62n), 2n ** 64n - 3n, 1.1, -2.5e-300, raw, null,
  ]);
  const launch = lastLaunch();
  assertEquals(launch.grid, [3, 2, 5]);
  assertEquals(launch.block, [32, 4, 1]);
  assertSame(launch.sharedBytes, 1024);
  assertSame(launch.paramCount, 9);
  assertSame(launch.stream, stream.handle);
  const want = new DataView(new ArrayBuffer(8 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8));
  want.setBigUint64(0, BigInt(t.address), true);
  want.setInt32(8, -5, true);
  want.setUint32(12, 0xffff_fffe, true);
  want.setBigInt64(16, -(2n ** 62n), true);
  want.setBigUint64(24, 2n ** 64n - 3n, true);
  want.setFloat32(32, 1.1, true);
  want.setFloat64(36, -2.5e-300, true);
  want.setBigUint64(44, raw, true);
  want.setBigUint64(52, 0n, true);
  assertEquals(Array.from(launch.params), Array.from(new Uint8Array(want.buffer)));

  // Numbers for 64-bit integers, a number for a raw pointer, one-number extents.
  k.launch({ stream, grid: 7, block: 64 }, [t, 2 ** 31 - 1, 0, -1, 9, 0, 0, 4096, null]);
  const again = lastLaunch();
  assertEquals(again.grid, [7, 1, 1]);
  assertEquals(again.block, [64, 1, 1]);
  assertSame(again.sharedBytes, 0);
  const view = new DataView(again.params.buffer);
  assertSame(view.getInt32(8, true), 2 ** 31 - 1);
  assertSame(view.getBigInt64(16, true), -1n);
  assertSame(view.getBigUint64(24, true), 9n);
  assertSame(view.getBigUint64(44, true), 4096n);

  module.function("no_params", []).launch({ stream, grid: [1], block: [1] }, []);
  assertSame(lastLaunch().paramCount, 0);
  assertSame(lastLaunch().params.length, 0);
});

kernelTest("arguments are checked against the declared signature", () => {
  using stream = Stream.create("cuda:0");
  using module = Module.load(RECORDING_PTX, "cuda:0");
  const k = module.function("every_type", EVERY_TYPE);
  using t = DeviceTensor.zeros([4], "float32", "cuda:0");
  const good = [t, 1, 2, 3n, 4n, 5, 6, 7, null] as const;
  const launch = (args: readonly unknown[], opts: Record<string, unknown> = {}) =>
    k.launch({ stream, grid: 1, block: 1, ...opts } as never, args as never);
  launch(good);
  const invalid = (args: readonly unknown[], text: string, opts: Record<string, unknown> = {}) => {
    const e = assertThrows(() => launch(args, opts), MtcError, text);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
    assert(e.message.startsWith("every_type.launch: "), e.message);
  };
  const at = (i: number, value: unknown) => good.map((v, j) => (j === i ? value : v));
  invalid(good.slice(1), "takes 9 arguments, got 8");
  invalid([...good, 1], "takes 9 arguments, got 10");
  invalid(at(1, 2 ** 31), "argument 1 (i32): 2147483648 is not an integer -2147483648 … 2147483647");
  invalid(at(1, 1.5), "argument 1 (i32): 1.5 is not an integer");
  invalid(at(2, -1), "argument 2 (u32): -1 is not an integer 0 … 4294967295");
  invalid(at(3, 2n ** 63n), "argument 3 (i64)");
  invalid(at(4, -1n), "argument 4 (u64): -1n is not an integer");
  invalid(at(5, "1"), 'argument 5 (f32): "1" is not a number');
  invalid(at(6, 1n), "argument 6 (f64): 1n is not a number");
  invalid(at(0, 3.5), "argument 0 (ptr): 3.5 is no DeviceTensor, device address or null");
  invalid(at(0, new Float32Array(4)), "argument 0 (ptr): Float32Array is no DeviceTensor");
  // An object shaped like a DeviceTensor names no block the library made: refused, never retained.
  const lookAlike = { address: t.address, deviceIndex: 0, block: 123, disposed: false };
  invalid(at(0, lookAlike), "argument 0 (ptr): Object is no DeviceTensor");
  invalid(at(1, t), "argument 1 (i32): DeviceTensor is not an integer");
  invalid(good, "grid y is 0", { grid: [1, 0] });
  invalid(good, "block must be a number or an array of 1 to 3 numbers", { block: [1, 1, 1, 1] });
  invalid(good, "sharedBytes -1", { sharedBytes: -1 });
  invalid(good, "options.stream must be a Stream", { stream: 5 });

  using other = DeviceTensor.zeros([4], "float32", "cuda:1");
  invalid(at(0, other), "argument 0 (ptr): a tensor on cuda:1, but the kernel runs on cuda:0");
  using stream1 = Stream.create("cuda:1");
  invalid(good, "the stream is on cuda:1, the module on cuda:0", { stream: stream1 });
  const gone = DeviceTensor.zeros([4], "float32", "cuda:0");
  gone.dispose();
  assertSame(assertThrows(() => launch(at(0, gone)), MtcError, "argument 0 (ptr): the tensor was disposed").code, "MTC_ERR_INVALID_STATE");
});

kernelTest("launch failures carry the driver's error", () => {
  using stream = Stream.create("cuda:0");
  const module = Module.load(KERNELS_PTX, "cuda:0");
  const k = module.function("add_one_f32", ["ptr", "u32"]);
  using t = DeviceTensor.zeros([4], "float32", "cuda:0");
  const wide = assertThrows(() => k.launch({ stream, grid: 1, block: 2048 }, [t, 4]), MtcError);
  assertSame(wide.code, "MTC_ERR_CUDA");
  assert(wide.message.startsWith("add_one_f32.launch: mtc_kernel_launch: cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE"), wide.message);
  assertThrows(() => k.launch({ stream, grid: 1, block: 4, sharedBytes: 1 << 20 }, [t, 4]), MtcError, "CUDA_ERROR_INVALID_VALUE");
  // Writing past the tensor: the emulation checks every byte a kernel touches.
  assertThrows(() => k.launch({ stream, grid: 1, block: 64 }, [t, 64]), MtcError, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assertEquals(floats(t), [0, 0, 0, 0], "a failed launch wrote nothing");
  module.dispose();
  assertSame(assertThrows(() => k.launch({ stream, grid: 1, block: 4 }, [t, 4]), MtcError, "was disposed").code, "MTC_ERR_INVALID_STATE");
  stream.dispose();
  using module2 = Module.load(KERNELS_PTX, "cuda:0");
  const k2 = module2.function("add_one_f32", ["ptr", "u32"]);
  assertThrows(() => k2.launch({ stream, grid: 1, block: 4 }, [t, 4]), MtcError, "was disposed");
});

kernelTest("the emulated kernels compute: one thread per element", () => {
  using stream = Stream.create("cuda:1");
  using module = Module.load(KERNELS_PTX, "cuda:1");
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  const scaleAdd = module.function("scale_add_f32", ["ptr", "ptr", "f32", "f32", "u32"]);
  using x = DeviceTensor.zeros([10], "float32", "cuda:1");
  addOne.launch({ stream, grid: 2, block: 4 }, [x, 10]); // covers 8 of 10
  addOne.launch({ stream, grid: 1, block: 32 }, [x, 10]);
  stream.synchronize();
  assertEquals(floats(x), [2, 2, 2, 2, 2, 2, 2, 2, 1, 1]);
  using y = DeviceTensor.empty([10], "float32", "cuda:1");
  scaleAdd.launch({ stream, grid: 1, block: 16 }, [x, y, 3, -0.5, 10]);
  stream.synchronize();
  assertEquals(floats(y), [5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 5.5, 2.5, 2.5]);
});

kernelTest("tensors a launch uses stay allocated until the stream has passed it", async () => {
  using stream = Stream.create("cuda:0");
  using module = Module.load(KERNELS_PTX, "cuda:0");
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  settleLaunches(true);
  const before = poolStats().blocksLive;
  await withCopyDelay(300_000, () => {
    const t = DeviceTensor.zeros([64], "float32", "cuda:0");
    addOne.launch({ stream, grid: 1, block: 64 }, [t, 64]); // "runs" 300 ms
    t.dispose();
    assertSame(poolStats().blocksLive, before + 1, "the launch holds the block");
    assertSame(settleLaunches(), 1, "one launch in flight");
    assertSame(poolStats().blocksLive, before + 1);
    stream.synchronize(); // the stream passed the launch: its blocks go back
    assertSame(settleLaunches(), 0);
    assertSame(poolStats().blocksLive, before);

    const u = DeviceTensor.zeros([64], "float32", "cuda:0");
    addOne.launch({ stream, grid: 1, block: 64 }, [u, 64]);
    u.dispose();
    const t0 = performance.now();
    assertSame(settleLaunches(true), 0, "settleLaunches(true) waits");
    assert(performance.now() - t0 > 200, "it waited for the launch");
    assertSame(poolStats().blocksLive, before);
  });
});

test("kernels: examples/kernel.ts without a CUDA driver says why and exits 0", async () => {
  const example = new URL("../../examples/kernel.ts", import.meta.url).pathname;
  const r = await runScript(example, [], { MTC_CUDA_DRIVER: "/nonexistent/libcuda.so.1" });
  const shown = `code ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr.slice(-2000)}`;
  assertSame(r.code, 0, shown);
  assert(r.stdout.startsWith("No CUDA device (could not load the CUDA driver /nonexistent/libcuda.so.1: "), shown);
});
