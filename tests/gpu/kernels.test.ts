// The caller's own kernels on the GPU: the PTX of examples/kernel_ptx.ts
// compiled by the driver and run on copied data (values checked exactly),
// the driver's own errors for a bad image, a missing kernel and a block too
// large, memory given back once the stream has passed the launches, and
// examples/kernel.ts as a user runs it.
import { DeviceTensor, disposeAll, Module, MtcError, poolStats, settleLaunches, startCopy, Stream, Tensor, withStream } from "../../ts/mod.ts";
import { KERNELS_PTX } from "../../examples/kernel_ptx.ts";
import { seededRandom } from "../../examples/example_batch.ts";
import { runScript } from "../ts/fixtures/spawn.ts";
import { assert, assertEquals, assertSame, assertThrows, env } from "../ts/harness.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";

function floats(t: DeviceTensor): Float32Array {
  return t.toHost() as Float32Array;
}

gpuTest("kernels: a PTX kernel computes on copied data (exact values)", async () => {
  using stream = Stream.create(DEVICE);
  using module = Module.load(KERNELS_PTX, DEVICE);
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  const scaleAdd = module.function("scale_add_f32", ["ptr", "ptr", "f32", "f32", "u32"]);

  const n = 1_000_003; // not a multiple of the block
  const random = seededRandom(7);
  const x = Float32Array.from({ length: n }, () => Math.floor(random() * 4096) * 0.25 - 512);
  const onGpu = await withStream(stream, () => startCopy({ x }, DEVICE));
  using y = DeviceTensor.empty([n], "float32", DEVICE);
  scaleAdd.launch({ stream, grid: Math.ceil(n / 256), block: 256 }, [onGpu.x, y, -3, 0.5, n]);
  addOne.launch({ stream, grid: Math.ceil(n / 128), block: [128, 1, 1] }, [y, n]);
  onGpu.x.dispose(); // the launch holds its memory
  const back = await withStream(stream, () => startCopy(y, "cpu"));
  const got = (back instanceof Tensor ? back.data : back) as Float32Array;
  let wrong = 0;
  for (let i = 0; i < n; i++) if (got[i] !== -3 * x[i]! + 0.5 + 1) wrong++;
  assertSame(wrong, 0, `${wrong} of ${n} values differ`);
  disposeAll(back);

  // A grid that covers part of the tensor writes that part only.
  using z = DeviceTensor.zeros([1000], "float32", DEVICE);
  addOne.launch({ stream, grid: 3, block: 100 }, [z, 1000]);
  stream.synchronize();
  const zs = floats(z);
  assertSame(zs[299], 1);
  assertSame(zs[300], 0);
});

gpuTest("kernels: the real driver's errors are MtcErrors with its names", () => {
  const bad = assertThrows(() => Module.load("this is no module", DEVICE), MtcError, "failed: CUDA_ERROR_");
  assertSame(bad.code, "MTC_ERR_CUDA");
  // A PTX error: the driver's JIT log comes with it. The emulated driver
  // compiles nothing, but rejects a .target newer than its sm_90.
  const broken = env("MTC_CUDA_DRIVER") ? KERNELS_PTX.replace("sm_80", "sm_120") : KERNELS_PTX.replace("add.f32", "addd.f32");
  const typo = assertThrows(() => Module.load(broken, DEVICE), MtcError, "CUDA_ERROR_INVALID_PTX");
  assert(typo.message.includes("the JIT compiler says: "), typo.message);
  using module = Module.load(new TextEncoder().encode(KERNELS_PTX), DEVICE);
  const missing = assertThrows(() => module.function("no_such_kernel", []), MtcError, "CUDA_ERROR_NOT_FOUND");
  assertSame(missing.code, "MTC_ERR_CUDA");
  using stream = Stream.create(DEVICE);
  using t = DeviceTensor.zeros([4], "float32", DEVICE);
  const k = module.function("add_one_f32", ["ptr", "u32"]);
  const wide = assertThrows(() => k.launch({ stream, grid: 1, block: 4096 }, [t, 4]), MtcError, "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE");
  assertSame(wide.code, "MTC_ERR_CUDA");
  k.launch({ stream, grid: 1, block: 4 }, [t, 4]); // the stream still works
  stream.synchronize();
  assertEquals(Array.from(floats(t)), [1, 1, 1, 1]);
});

gpuTest("kernels: memory disposed during launches comes back once the stream passed them", () => {
  using stream = Stream.create(DEVICE);
  using module = Module.load(KERNELS_PTX, DEVICE);
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  settleLaunches(true);
  const before = poolStats().blocksLive;
  const n = 16 << 20;
  const t = DeviceTensor.zeros([n], "float32", DEVICE);
  for (let i = 0; i < 20; i++) addOne.launch({ stream, grid: n / 256, block: 256 }, [t, n]);
  t.dispose();
  assertSame(settleLaunches(true), 0);
  assertSame(poolStats().blocksLive, before);
  // The next allocation may reuse that memory: the launches were over.
  using u = DeviceTensor.zeros([n], "float32", DEVICE);
  addOne.launch({ stream, grid: n / 256, block: 256 }, [u, n]);
  stream.synchronize();
  const us = floats(u);
  assert(us[0] === 1 && us[n - 1] === 1, "one launch on fresh zeros");
});

gpuTest("kernels: examples/kernel.ts runs and checks its results", async () => {
  const r = await runScript(new URL("../../examples/kernel.ts", import.meta.url).pathname, [], {});
  const shown = `code ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr.slice(-2000)}`;
  assertSame(r.code, 0, shown);
  assert(r.stdout.includes("scale_add_f32 ran on 4 copied tensors (100237 floats) on cuda:0: every value is 2x + 1"), shown);
});
