// What console.log shows for the library's objects (issue 26, item 9): one
// concise line from private state, in both runtimes (Bun reads
// Symbol.for("nodejs.util.inspect.custom"), Deno Symbol.for("Deno.customInspect")),
// never throwing, also for disposed objects, whose address would throw.
// The same line is each object's toString() and toJSON() (issue 35, item 5),
// and every class mod.ts exports has one.
import * as mtc from "../../ts/mod.ts";
import {
  Arena,
  AsyncCopyHandle,
  CudaEvent,
  DeviceTensor,
  disposeAll,
  Identity,
  Kernel,
  MtcError,
  Module,
  pinnedTensor,
  prepareCopy,
  prepareCopyInto,
  startCopy,
  startLoader,
  Stream,
  Tensor,
  ToDevice,
} from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertEquals, assertSame, assertThrows, runner, test } from "./harness.ts";

const inspectTest = (name: string, fn: () => void | Promise<void>) => test(`inspect: ${name}`, fn, { skip: skipWithoutDriver });

type Inspect = (value: unknown) => string;
const g = globalThis as unknown as { Bun?: { inspect: Inspect }; Deno?: { inspect: Inspect } };
/** The runtime's own inspect, which console.log uses. */
const inspect: Inspect = (value) => runner === "bun" ? g.Bun!.inspect(value) : g.Deno!.inspect(value);

const PRODUCERS = new URL("./fixtures/loader_batches.ts", import.meta.url);
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
  const arena = lines.indexOf("Arena(3 of 65536 bytes used)");
  assert(arena > 5, result.stdout);
  assertSame(lines[arena + 1], 'DeviceTensor(float32 [2, 3] cuda:0, disposed) {"arena":"Arena(3 of 65536 bytes used)"}');
});

inspectTest("both runtimes' symbols give the same line", () => {
  using t = DeviceTensor.zeros([2], "float16", "cuda:0");
  const node = (t as unknown as Record<symbol, (...args: unknown[]) => string>)[Symbol.for("nodejs.util.inspect.custom")]!;
  const deno = (t as unknown as Record<symbol, (...args: unknown[]) => string>)[Symbol.for("Deno.customInspect")]!;
  assertSame(node.call(t, 2, {}, inspect), "DeviceTensor(float16 [2] cuda:0)");
  assertSame(deno.call(t, inspect, {}), "DeviceTensor(float16 [2] cuda:0)");
  assertSame(Object.keys(t).length, 0, "nothing enumerable added");
});

inspectTest("arenas, pinned tensors, prepared copies, ToDevice and Identity: what they are and their state", () => {
  const arena = Arena.create(1 << 16);
  assertSame(inspect(arena), "Arena(0 of 65536 bytes used)");
  const boxes = arena.tensor("float32", [2, 2]);
  boxes.data.fill(0.5);
  arena.array("int8", 3);
  assertSame(inspect(arena), "Arena(19 of 65536 bytes used)", "16-byte aligned: 16 + 3");
  assertSame(inspect(boxes), "Tensor(float32 [2, 2] cpu, pinned) [0.5, 0.5, 0.5, 0.5]");
  arena.dispose();
  assertSame(inspect(arena), "Arena(65536 bytes, disposed)");
  assertSame(inspect(boxes), "Tensor(float32 [2, 2] cpu, disposed)");

  const sevens = pinnedTensor("int32", [2]);
  sevens.data.fill(7);
  assertSame(inspect(sevens), "Tensor(int32 [2] cpu, pinned) [7, 7]");
  sevens.dispose();
  assertSame(inspect(sevens), "Tensor(int32 [2] cpu, disposed)");

  const prepared = prepareCopy({ a: new Float32Array(4), b: [new Int8Array(2)], name: "x" }, "cuda:1");
  assertSame(inspect(prepared), "PreparedCopy(2 leaves to cuda:1)");
  prepared.dispose();
  assertSame(inspect(prepared), "PreparedCopy(2 leaves to cuda:1, disposed)");
  const buffers = startCopy({ ids: new Int32Array(4) }, "cuda:0").get();
  const step = prepareCopyInto({ ids: new Int32Array(4) }, buffers);
  assertSame(inspect(step), "PreparedCopyInto(1 leaf into cuda:0)");
  step.dispose();
  disposeAll(buffers);

  const toGpu1 = new ToDevice("cpu", "cuda:1");
  assertSame(inspect(toGpu1), "ToDevice(cpu to cuda:1)");
  assertSame(inspect(toGpu1.adjoint()), "ToDevice(cuda:1 to cpu)");
  assertSame(inspect(toGpu1.normal()), "Identity");
  for (const [cls, name] of [[Arena, "Arena"], [ToDevice, "ToDevice"]] as const) {
    assert(inspect(Object.create(cls.prototype)).startsWith(`${name} (not made by`), inspect(Object.create(cls.prototype)));
  }
});

inspectTest("a loader: its workers, the next batch, what is ready, closed", async () => {
  const loader = startLoader({ module: PRODUCERS, export: "ordered", device: "cuda:0", workers: 2, batches: 3 });
  assert(/^Loader\(2 workers, next batch 0 of 3, [0-3] ready\)$/.test(inspect(loader)), inspect(loader));
  disposeAll((await loader.next()).value);
  assert(/^Loader\(2 workers, next batch 1 of 3, [0-2] ready\)$/.test(inspect(loader)), inspect(loader));
  await loader.close();
  assertSame(inspect(loader), "Loader(2 workers, closed)");
});

inspectTest("toString and toJSON give the same line: a DeviceTensor in a template string or in JSON", () => {
  using t = DeviceTensor.zeros([2, 3], "float32", "cuda:1");
  assertSame(`${t}`, "DeviceTensor(float32 [2, 3] cuda:1)");
  assertSame(String(t), inspect(t));
  assertSame(JSON.stringify({ t }), '{"t":"DeviceTensor(float32 [2, 3] cuda:1)"}');
  const tensor = new Tensor(new Int8Array([1, 2]), [2]);
  assertSame(`${tensor}`, "Tensor(int8 [2] cpu) [1, 2]");
  assertSame(JSON.stringify([tensor]), '["Tensor(int8 [2] cpu) [1, 2]"]');
  // An error keeps Error's toString; its JSON has what JSON of an Error leaves out, the message.
  const e = new MtcError(2, "bad", { path: ".a" });
  assertSame(String(e), "MtcError: .a: bad");
  assertEquals(JSON.parse(JSON.stringify(e)), { name: "MtcError", code: "MTC_ERR_INVALID_ARGUMENT", status: 2, path: ".a", message: ".a: bad" });
  // Nothing enumerable added: a spread or Object.keys sees none of it.
  assertEquals(Object.keys(t), []);
  assertSame(Object.keys(Object.getPrototypeOf(t)).length, 0);
});

/** An instance of each class mod.ts exports, what it prints, and how to give it back. */
async function oneOfEach(): Promise<Map<string, { value: object; line: RegExp; dispose?: () => unknown }>> {
  const stream = Stream.create("cuda:0");
  const module = Module.load(PTX, "cuda:0");
  const arena = Arena.create(1 << 16);
  arena.array("uint8", 5);
  const buffers = startCopy({ ids: new Int32Array(4) }, "cuda:0").get();
  const loader = startLoader({ module: PRODUCERS, export: "ordered", device: "cuda:0", workers: 1, batches: 1 });
  const made: [string, object, RegExp, (() => unknown)?][] = [
    ["AsyncCopyHandle", startCopy({}, "cpu"), /^AsyncCopyHandle\(to cpu, done\)$/],
    ["PreparedCopy", prepareCopy([new Float32Array(2)], "cuda:0"), /^PreparedCopy\(1 leaf to cuda:0\)$/],
    ["PreparedCopyInto", prepareCopyInto({ ids: new Int32Array(4) }, buffers), /^PreparedCopyInto\(1 leaf into cuda:0\)$/, () => disposeAll(buffers)],
    ["DeviceTensor", DeviceTensor.empty([3], "int16", "cuda:1"), /^DeviceTensor\(int16 \[3\] cuda:1\)$/],
    ["MtcError", new MtcError(3, "late"), /^MtcError \[MTC_ERR_INVALID_STATE\]: late\n/],
    ["CudaEvent", stream.recordEvent(), /^CudaEvent\(live\)$/],
    ["Stream", stream, /^Stream\(cuda:0, owned\)$/],
    ["Module", module, /^Module\(cuda:0\)$/],
    ["Kernel", module.function("add_one_f32", ["ptr", "u32"]), /^Kernel\(add_one_f32\(ptr, u32\) cuda:0\)$/],
    ["Tensor", new Tensor(new Float64Array([0.25]), []), /^Tensor\(float64 \[\] cpu\) \[0.25\]$/],
    ["Identity", new Identity(), /^Identity$/],
    ["ToDevice", new ToDevice("cuda:1", "cuda:0"), /^ToDevice\(cuda:1 to cuda:0\)$/],
    ["Arena", arena, /^Arena\(5 of 65536 bytes used\)$/],
    ["Loader", loader, /^Loader\(1 worker, next batch 0 of 1, [01] ready\)$/, () => loader.close()],
  ];
  return new Map(made.map(([name, value, line, dispose]) => [name, { value, line, dispose }]));
}

inspectTest("every class mod.ts exports prints its state, and has a toString and a toJSON that say the same", async () => {
  const exported = Object.entries(mtc)
    .filter(([, v]) => typeof v === "function" && /^class\b/.test(Function.prototype.toString.call(v)))
    .map(([name]) => name)
    .sort();
  const instances = await oneOfEach();
  // A class added to mod.ts without an entry above (and a way to print it) fails here.
  assertEquals([...instances.keys()].sort(), exported, "each exported class has an instance here");
  for (const [name, { value, line }] of instances) {
    const shown = inspect(value);
    assert(line.test(shown), `${name}: console.log shows ${JSON.stringify(shown)}`);
    assert(!/^_?\w+ \{/.test(shown), `${name}: the runtime's default form, ${shown}`);
    if (value instanceof Error) {
      assert(String(value).startsWith(`${name}: `), String(value));
      assert(JSON.stringify(value).includes('"message":'), JSON.stringify(value));
    } else {
      assertSame(String(value), shown, `${name}: toString`);
      assertSame(JSON.stringify(value), JSON.stringify(shown), `${name}: toJSON`);
    }
  }
  for (const { value, dispose } of instances.values()) {
    await dispose?.();
    (value as Partial<Disposable>)[Symbol.dispose]?.();
  }
});
