// What console.log shows for the library's objects (issue 26, item 9): one
// concise line from private state, in both runtimes (Bun reads
// Symbol.for("nodejs.util.inspect.custom"), Deno Symbol.for("Deno.customInspect")),
// never throwing, also for disposed objects, whose address would throw.
import { AsyncCopyHandle, CudaEvent, DeviceTensor, disposeAll, Kernel, MtcError, Module, startCopy, Stream, Tensor } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertSame, assertThrows, runner, test } from "./harness.ts";

const inspectTest = (name: string, fn: () => void | Promise<void>) => test(`inspect: ${name}`, fn, { skip: skipWithoutDriver });

type Inspect = (value: unknown) => string;
const g = globalThis as unknown as { Bun?: { inspect: Inspect }; Deno?: { inspect: Inspect } };
/** The runtime's own inspect, which console.log uses. */
const inspect: Inspect = (value) => runner === "bun" ? g.Bun!.inspect(value) : g.Deno!.inspect(value);

const PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry add_one_f32(.param .u64 p, .param .u32 n) { ret; }\n";

inspectTest("DeviceTensor: dtype, shape, device, and disposed once it is", () => {
  const onGpu = startCopy({ t: new Tensor(new Float32Array(6), [2, 3]), v: new BigInt64Array(4) }, "cuda:1").get();
  assertSame(inspect(onGpu.t), "DeviceTensor(float32 [2, 3] cuda:1)");
  assertSame(inspect(onGpu.v), "DeviceTensor(int64 [4] cuda:1)");
  onGpu.t.dispose();
  assertThrows(() => onGpu.t.address, MtcError, "disposed");
  assertSame(inspect(onGpu.t), "DeviceTensor(float32 [2, 3] cuda:1, disposed)", "inspect still works");
  assertSame(inspect(DeviceTensor.empty([], "bool", "cuda:0")), "DeviceTensor(bool [] cuda:0)");
  assertSame(inspect(Object.create(DeviceTensor.prototype)), "DeviceTensor (not made by this library)");
  assert(inspect({ x: onGpu.v }).includes("x: DeviceTensor(int64 [4] cuda:1)"), inspect({ x: onGpu.v }));
  disposeAll(onGpu);
});

inspectTest("Tensor: dtype, shape and its first values; strided ones say so", () => {
  assertSame(inspect(new Tensor(new Float32Array([1, 2.5, 3, 4]), [2, 2])), "Tensor(float32 [2, 2] cpu) [1, 2.5, 3, 4]");
  assertSame(inspect(new Tensor(new BigUint64Array([7n]), [])), "Tensor(uint64 [] cpu) [7n]");
  assertSame(inspect(new Tensor(new Uint8Array(20), [20], "bool")), "Tensor(bool [20] cpu) [0, 0, 0, 0, 0, 0, 0, 0, ... 12 more]");
  const strided = new Tensor(new Float32Array(6), [3, 2], "float32", { strides: [1, 3] });
  assertSame(inspect(strided), "Tensor(float32 [3, 2] cpu, strided [1, 3])");
  // Fields are the caller's: whatever they hold, inspect shows it and does not throw.
  const broken = new Tensor(new Float32Array(2), [2]);
  (broken as { data: unknown }).data = "nope";
  assertSame(inspect(broken), "Tensor(float32 [2] cpu) (data is no typed array)");
  const hostile = new Tensor(new Float32Array(2), [2]);
  Object.defineProperty(hostile, "data", { get: () => { throw new Error("no data today"); } });
  assertSame(inspect(hostile), "Tensor (unreadable: no data today)");
});

inspectTest("handles, streams, events, modules and kernels: what they are and their state", async () => {
  const h = startCopy([new Float32Array(2)], "cuda:0");
  assert(/^AsyncCopyHandle\(to cuda:0, (pending|over, not read yet)\)$/.test(inspect(h)), inspect(h));
  const out = await h;
  assertSame(inspect(h), "AsyncCopyHandle(to cuda:0, done)");
  h.dispose();
  assertSame(inspect(h), "AsyncCopyHandle(to cuda:0, disposed)");
  assertSame(inspect(startCopy({}, "cpu")), "AsyncCopyHandle(to cpu, done)");
  disposeAll(out);

  const stream = Stream.create("cuda:1");
  assertSame(inspect(stream), "Stream(cuda:1, owned)");
  const event = stream.recordEvent();
  assertSame(inspect(event), "CudaEvent(live)");
  event.dispose();
  assertSame(inspect(event), "CudaEvent(disposed)");
  const wrapped = Stream.wrap(stream.handle, "cuda:1");
  assertSame(inspect(wrapped), "Stream(cuda:1, wrapped)");
  stream.dispose();
  assertSame(inspect(stream), "Stream(cuda:1, owned, disposed)");

  const module = Module.load(PTX, "cuda:0");
  const kernel = module.function("add_one_f32", ["ptr", "u32"]);
  assertSame(inspect(module), "Module(cuda:0)");
  assertSame(inspect(kernel), "Kernel(add_one_f32(ptr, u32) cuda:0)");
  module.dispose();
  assertSame(inspect(module), "Module(cuda:0, disposed)");
  assertSame(inspect(kernel), "Kernel(add_one_f32(ptr, u32) cuda:0, module disposed)");
  for (const [cls, name] of [[AsyncCopyHandle, "AsyncCopyHandle"], [Stream, "Stream"], [CudaEvent, "CudaEvent"], [Module, "Module"], [Kernel, "Kernel"]] as const) {
    assertSame(inspect(Object.create(cls.prototype)), `${name} (not made by this library)`);
  }
});

inspectTest("MtcError: its code, path and message, the stack, then the cause", () => {
  const e = new MtcError(2, "bad leaf", { path: "[3].x", cause: new Error("the reason") });
  const shown = inspect(e);
  assert(shown.startsWith("MtcError [MTC_ERR_INVALID_ARGUMENT]: [3].x: bad leaf\n    at "), shown);
  assert(shown.includes("[cause]: Error: the reason"), shown);
  assert(!shown.includes("path: undefined"), shown);
});

inspectTest("console.log prints the same, in a process of its own", async () => {
  const child = new URL("./fixtures/inspect_child.ts", import.meta.url).pathname;
  const result = await runScript(child, [], { NO_COLOR: "1" });
  assertSame(result.code, 0, result.stderr);
  const lines = result.stdout.split("\n");
  assertSame(lines[0], "DeviceTensor(float32 [2, 3] cuda:0)");
  assertSame(lines[1], "DeviceTensor(float32 [2, 3] cuda:0, disposed)");
  assertSame(lines[2], "Tensor(int32 [3] cpu) [1, 2, 3]");
  assertSame(lines[3], "Stream(cuda:0, owned, disposed)");
  assertSame(lines[4], "Kernel(k(u32) cuda:0, module disposed)");
  assertSame(lines[5], "MtcError [MTC_ERR_INVALID_ARGUMENT]: .a: bad");
});

inspectTest("both runtimes' symbols give the same line", () => {
  using t = DeviceTensor.zeros([2], "float16", "cuda:0");
  const node = (t as unknown as Record<symbol, (...args: unknown[]) => string>)[Symbol.for("nodejs.util.inspect.custom")]!;
  const deno = (t as unknown as Record<symbol, (...args: unknown[]) => string>)[Symbol.for("Deno.customInspect")]!;
  assertSame(node.call(t, 2, {}, inspect), "DeviceTensor(float16 [2] cuda:0)");
  assertSame(deno.call(t, inspect, {}), "DeviceTensor(float16 [2] cuda:0)");
  assertSame(Object.keys(t).length, 0, "nothing enumerable added");
});
