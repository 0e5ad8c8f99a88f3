// The caller's code running inside a kernel launch, on the emulated driver:
// getters on `args` indices and on launch options, Proxy traps on `args`
// and `options`, that dispose the module, the stream or a tensor already
// read. A launch reads every input once, takes a share of each tensor's
// block, then checks what it uses and calls C with no caller code in
// between: so each case is an MtcError (or a launch on live memory), never
// a launch on a freed module, stream or block. Also: objects that only look
// like the library's (forged DeviceTensors, Streams, CudaEvents, Modules,
// Kernels), fields redefined on genuine ones, and the argument and image
// errors of Module.load, module.function and 64-bit arguments.
import {
  CudaEvent,
  currentStream,
  DeviceTensor,
  Kernel,
  Module,
  MtcError,
  poolStats,
  settleLaunches,
  startCopy,
  Stream,
  withStream,
} from "../../ts/mod.ts";
import { KERNELS_PTX } from "../../examples/kernel_ptx.ts";
import { fakeDriver, skipWithoutDriver } from "./fake_driver.ts";
import { assert, assertEquals, assertSame, assertThrows, test } from "./harness.ts";

const reentrancyTest = (name: string, fn: () => void | Promise<void>) =>
  test(`launch reentrancy: ${name}`, fn, { skip: skipWithoutDriver });

/** A kernel that only records its launches: 64-bit integers and a raw pointer. */
const WIDE_PTX = `
.version 8.0
.target sm_80
.address_size 64
.visible .entry wide(.param .u64 a, .param .s64 b, .param .u64 p) { ret; }
`;

/** A stream, the example module, add_one_f32 and a zeroed 4-float tensor on cuda:0. */
function setup() {
  const stream = Stream.create("cuda:0");
  const module = Module.load(KERNELS_PTX, "cuda:0");
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  const t = DeviceTensor.zeros([4], "float32", "cuda:0");
  return {
    stream,
    module,
    addOne,
    t,
    [Symbol.dispose]() {
      t.dispose();
      module.dispose();
      stream.dispose();
    },
  };
}

function floats(t: DeviceTensor): number[] {
  return Array.from(t.toHost() as Float32Array);
}

/** Args whose index `at` is a getter: it runs `effect`, then gives `value`. */
function argsWithGetter(values: unknown[], at: number, effect: () => void): never {
  const args = values.slice();
  const value = args[at];
  Object.defineProperty(args, at, { get: () => (effect(), value), enumerable: true });
  return args as never;
}

/** Options whose `key` is a getter: it runs `effect`, then gives `value`. */
function optionsWithGetter(options: Record<string, unknown>, key: string, effect: () => void): never {
  const copy = { ...options };
  const value = copy[key];
  Object.defineProperty(copy, key, { get: () => (effect(), value), enumerable: true });
  return copy as never;
}

/** A Proxy over `target` whose get trap runs `effect` when `key` is read. */
function trapOn<T extends object>(target: T, key: string, effect: () => void): T {
  return new Proxy(target, {
    get(t, k, receiver) {
      if (k === key) effect();
      return Reflect.get(t, k, receiver);
    },
  });
}

type Setup = ReturnType<typeof setup>;

/** `new Class(...args)`, as a caller would try it on a class whose constructor is private. */
function construct(Class: unknown, ...args: unknown[]): unknown {
  return new (Class as new (...a: unknown[]) => unknown)(...args);
}

/** Every place the caller's code can run inside launch: each launches add_one_f32 on s.t with `effect` run there. */
const POSITIONS: [string, (s: Setup, effect: () => void) => void][] = [
  ["a getter on args[1]", (s, effect) => s.addOne.launch(opts(s), argsWithGetter([s.t, 4], 1, effect))],
  ["a getter on args[0]", (s, effect) => s.addOne.launch(opts(s), argsWithGetter([s.t, 4], 0, effect))],
  ["a Proxy trap on args[1]", (s, effect) => s.addOne.launch(opts(s), trapOn([s.t, 4], "1", effect) as never)],
  ["a Proxy trap on args.length", (s, effect) => s.addOne.launch(opts(s), trapOn([s.t, 4], "length", effect) as never)],
  ["a getter on options.grid", (s, effect) => s.addOne.launch(optionsWithGetter(opts(s), "grid", effect), [s.t, 4])],
  ["a getter on options.block", (s, effect) => s.addOne.launch(optionsWithGetter(opts(s), "block", effect), [s.t, 4])],
  ["a getter on options.sharedBytes", (s, effect) => s.addOne.launch(optionsWithGetter({ ...opts(s), sharedBytes: 0 }, "sharedBytes", effect), [s.t, 4])],
  ["a getter on options.stream", (s, effect) => s.addOne.launch(optionsWithGetter(opts(s), "stream", effect), [s.t, 4])],
  ["a getter on grid[1]", (s, effect) => s.addOne.launch({ ...opts(s), grid: argsWithGetter([1, 1], 1, effect) }, [s.t, 4])],
  ["a Proxy trap on options.block", (s, effect) => s.addOne.launch(trapOn(opts(s), "block", effect), [s.t, 4])],
];

function opts(s: Setup) {
  return { stream: s.stream, grid: 1, block: 4 };
}

/** What the caller's code disposes, and the error the launch must give instead of using it. */
const TARGETS: [string, string, (s: Setup) => void, string][] = [
  ["D2", "the module", (s) => s.module.dispose(), "this Module (cuda:0) was disposed"],
  ["D3b", "the stream", (s) => s.stream.dispose(), "this Stream (cuda:0) was disposed"],
  ["D3", "the tensor argument", (s) => s.t.dispose(), "add_one_f32.launch: argument 0 (ptr): the tensor was disposed"],
];

/** Launches through `position` with the caller's code disposing `target`; checks the error and that nothing leaked. */
function disposedMidLaunch(target: (typeof TARGETS)[number], position: (typeof POSITIONS)[number]): void {
  const [, , dispose, text] = target;
  const [where, launch] = position;
  settleLaunches(true);
  const before = poolStats().blocksLive;
  {
    using s = setup();
    let e: MtcError;
    try {
      e = assertThrows(() => launch(s, () => dispose(s)), MtcError, text);
    } catch (failure) {
      throw new Error(`${where}: ${(failure as Error).message}`);
    }
    assertSame(e.code, "MTC_ERR_INVALID_STATE", e.message);
    if (!s.t.disposed) assertEquals(floats(s.t), [0, 0, 0, 0], `${where}: nothing was launched`);
  }
  settleLaunches(true);
  assertSame(poolStats().blocksLive, before, `${where}: every block freed once, none held`);
}

/**
 * Where the caller's code ran before the launch looked at what it disposed,
 * and so already gave the MtcError: the options.stream getter (read before
 * the stream's check) and a tensor disposed before its own argument was read.
 */
const checkedAfter = (defect: string, position: string) =>
  position === "a getter on options.stream" || (defect === "D3" && !position.endsWith("args[1]"));

for (const target of TARGETS) {
  const [defect, what] = target;
  for (const position of POSITIONS) {
    if (checkedAfter(defect, position[0])) continue;
    reentrancyTest(`${defect}: ${position[0]} that disposes ${what}: MtcError, nothing launched, nothing leaked`, () => {
      disposedMidLaunch(target, position);
    });
  }
}

reentrancyTest("D2, D3, D3b: where the disposal came before the check already, it still does", () => {
  for (const target of TARGETS) {
    for (const position of POSITIONS) if (checkedAfter(target[0], position[0])) disposedMidLaunch(target, position);
  }
});

reentrancyTest("D3: a later argument's getter that disposes two earlier tensors: MtcError, both blocks freed; shares given back", () => {
  settleLaunches(true);
  const before = poolStats().blocksLive;
  using stream = Stream.create("cuda:0");
  using module = Module.load(KERNELS_PTX, "cuda:0");
  const scaleAdd = module.function("scale_add_f32", ["ptr", "ptr", "f32", "f32", "u32"]);
  const x = DeviceTensor.zeros([4], "float32", "cuda:0");
  const y = DeviceTensor.zeros([4], "float32", "cuda:0");
  const args = argsWithGetter([x, y, 2, 1, 4], 4, () => (x.dispose(), y.dispose()));
  const e = assertThrows(() => scaleAdd.launch({ stream, grid: 1, block: 4 }, args), MtcError, "argument 0 (ptr): the tensor was disposed");
  assertSame(e.code, "MTC_ERR_INVALID_STATE");
  settleLaunches(true);
  assertSame(poolStats().blocksLive, before, "both blocks freed");

  // A launch that goes ahead gives its own shares back: C alone holds the block until the stream passed it.
  const z = DeviceTensor.zeros([4], "float32", "cuda:0");
  scaleAdd.launch({ stream, grid: 1, block: 4 }, argsWithGetter([z, z, 1, 1, 4], 2, () => {}));
  z.dispose();
  assertSame(poolStats().blocksLive, before + 1, "the launch holds z's block");
  stream.synchronize();
  assertSame(settleLaunches(true), 0);
  assertSame(poolStats().blocksLive, before, "then lets it go");
});

reentrancyTest("D3: the caller's code run while the arguments are marshalled (a replaced BigInt) disposes a tensor already read: the launch's share keeps its block for the launch", () => {
  settleLaunches(true);
  const before = poolStats().blocksLive;
  using stream = Stream.create("cuda:0");
  using module = Module.load(KERNELS_PTX, "cuda:0");
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  const t = DeviceTensor.zeros([4], "float32", "cuda:0");
  const address = t.address;
  // Marshalling writes a tensor's address with the global BigInt, after it
  // has taken its share and before C retains the block: the one moment the
  // caller's code could free it under the launch.
  const global = globalThis as unknown as { BigInt: (value: unknown) => bigint };
  const realBigInt = global.BigInt;
  let disposedInside = 0;
  global.BigInt = (value) => {
    if (value === address && disposedInside++ === 0) t.dispose();
    return realBigInt(value);
  };
  try {
    addOne.launch({ stream, grid: 1, block: 4 }, [t, 4]);
  } finally {
    global.BigInt = realBigInt;
  }
  assertSame(disposedInside, 1, "the replaced BigInt ran inside the launch, once");
  assert(t.disposed);
  assertSame(poolStats().blocksLive, before + 1, "the launch holds the block of the tensor disposed under it");
  const launched = fakeDriver()!.lastLaunch()!;
  assertSame(new DataView(launched.params.buffer).getBigUint64(0, true), realBigInt(address), "the kernel ran on that block");
  stream.synchronize();
  assertSame(settleLaunches(true), 0);
  assertSame(poolStats().blocksLive, before, "then lets it go");
});

reentrancyTest("D8: a forged or proxied DeviceTensor as an argument is an MtcError naming it", () => {
  using s = setup();
  const invalid = (value: unknown, text: string, at = 0) => {
    const args: unknown[] = [s.t, 4];
    args[at] = value;
    const e = assertThrows(() => s.addOne.launch({ stream: s.stream, grid: 1, block: 4 }, args as never), MtcError, text);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
  };
  const forged = Object.create(DeviceTensor.prototype) as DeviceTensor;
  invalid(forged, "add_one_f32.launch: argument 0 (ptr): DeviceTensor is no DeviceTensor of this library");
  invalid(new Proxy(s.t, {}), "add_one_f32.launch: argument 0 (ptr): DeviceTensor is no DeviceTensor of this library");
  invalid({ address: s.t.address, deviceIndex: 0, block: s.t.block, disposed: false }, "argument 0 (ptr): Object is no DeviceTensor");
  invalid(forged, "add_one_f32.launch: argument 1 (u32): DeviceTensor is not an integer", 1);
  // A constructor getter that throws does not replace the error.
  invalid({ get constructor() { throw new Error("boom"); } }, "argument 0 (ptr): an object is no DeviceTensor");
  assertEquals(floats(s.t), [0, 0, 0, 0]);
});

reentrancyTest("D8: a forged Stream as options.stream is an MtcError; new Module and new Kernel are refused", () => {
  using s = setup();
  const invalid = (fn: () => unknown, text: string) => {
    const e = assertThrows(fn, MtcError, text);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
  };
  const forged = Object.create(Stream.prototype) as Stream;
  invalid(() => s.addOne.launch({ stream: forged, grid: 1, block: 4 }, [s.t, 4]), "add_one_f32.launch: options.stream must be a Stream");
  invalid(() => s.addOne.launch({ stream: new Proxy(s.stream, {}), grid: 1, block: 4 }, [s.t, 4]), "options.stream must be a Stream");
  // Each would wrap a pointer of the caller's choosing, which C would take for a module or a kernel.
  invalid(() => construct(Module, 0x1234, 0), "new Module(): a Module is made by Module.load");
  invalid(() => construct(Kernel, s.module, "add_one_f32", ["ptr", "u32"], 0x1234), "new Kernel(): a Kernel is made by Module.function");
  assertEquals(floats(s.t), [0, 0, 0, 0]);
});

reentrancyTest("only private state is read: fields redefined on a Kernel, Module or Stream are not consulted by launch", () => {
  using s = setup();
  using other = Module.load(KERNELS_PTX, "cuda:1");
  let called = 0;
  Object.defineProperty(s.addOne, "params", { value: ["u64", "u32"] });
  Object.defineProperty(s.addOne, "module", { value: other });
  Object.defineProperty(s.module, "deviceIndex", { value: 1 });
  Object.defineProperty(s.stream, "handle", { get: () => (called++, s.stream.dispose(), 0x1234) });
  Object.defineProperty(s.stream, "deviceIndex", { get: () => (called++, 1) });
  s.addOne.launch({ stream: s.stream, grid: 1, block: 4 }, [s.t, 4]);
  s.stream.synchronize();
  assertEquals(floats(s.t), [1, 1, 1, 1]);
  assertSame(called, 0, "the stream's redefined fields were never read");
});

reentrancyTest("D8 (streams): forged Streams and CudaEvents are MtcErrors; new Stream and new CudaEvent are refused", () => {
  using stream = Stream.create("cuda:0");
  const invalid = (fn: () => unknown, text: string) => {
    const e = assertThrows(fn, MtcError, text);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
  };
  const forged = Object.create(Stream.prototype) as Stream;
  invalid(() => withStream(forged, () => 1), "withStream: the stream must be a Stream");
  invalid(() => withStream(new Proxy(stream, {}), () => 1), "withStream: the stream must be a Stream");
  invalid(() => stream.waitStream(forged), "Stream.waitStream: other must be a Stream");
  invalid(() => stream.waitEvent(Object.create(CudaEvent.prototype)), "Stream.waitEvent: the event must be a CudaEvent");
  using event = stream.recordEvent();
  invalid(() => stream.waitEvent(new Proxy(event, {})), "Stream.waitEvent: the event must be a CudaEvent");
  // Each would wrap a pointer of the caller's choosing: a stream dispose() destroys, an event C releases.
  invalid(() => construct(Stream, 0, 0x1234, true), "new Stream(): a Stream is made by Stream.create or Stream.wrap");
  invalid(() => construct(CudaEvent, 0x1234), "new CudaEvent(): a CudaEvent is made by Stream.recordEvent or completionEvent()");
});

reentrancyTest("only private state is read: a Stream's redefined handle is not consulted by its own calls", () => {
  using stream = Stream.create("cuda:0");
  let called = 0;
  // A `handle` getter that disposes the stream: every call that hands the stream to C would get a destroyed one.
  Object.defineProperty(stream, "handle", { get: () => (called++, stream.dispose(), 0x1234) });
  stream.synchronize();
  using event = stream.recordEvent();
  stream.waitEvent(event);
  stream.waitStream(stream);
  stream.synchronize();
  assertSame(called, 0, "the redefined handle was never read");
  assert(!stream.disposed);
});

reentrancyTest("only private state is read: withStream's scope stays on the stream's own device", () => {
  using stream = Stream.create("cuda:0");
  Object.defineProperty(stream, "deviceIndex", { value: 1 });
  assertSame(withStream(stream, () => currentStream("cuda:0")), stream);
  assertSame(currentStream("cuda:0"), null);
  assertSame(currentStream("cuda:1"), null);
});

reentrancyTest("only private state is read: a copy inside withStream hands C the stream's own handle", () => {
  using stream = Stream.create("cuda:0");
  let called = 0;
  Object.defineProperty(stream, "handle", { get: () => (called++, stream.dispose(), 0x1234) });
  Object.defineProperty(stream, "deviceIndex", { get: () => (called++, 1) });
  using onGpu = withStream(stream, () => startCopy(new Float32Array([1, 2, 3]), "cuda:0").get());
  assertEquals(floats(onGpu), [1, 2, 3]);
  assertSame(called, 0, "the redefined fields were never read");
  assert(!stream.disposed);
});

reentrancyTest("N1: Module.load of a detached buffer, or of bytes whose byteLength lies, reads the real bytes", () => {
  const bytes = new TextEncoder().encode(KERNELS_PTX);
  const detached = bytes.slice().buffer;
  structuredClone(detached, { transfer: [detached] });
  const e = assertThrows(() => Module.load(detached, "cuda:0"), MtcError, "Module.load: the image's ArrayBuffer was detached");
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  const view = bytes.slice();
  structuredClone(view.buffer, { transfer: [view.buffer] });
  assertThrows(() => Module.load(view, "cuda:0"), MtcError, "Module.load: the image's ArrayBuffer was detached");

  // A lying byteLength, and one whose getter detaches the buffer: neither is read.
  const short = bytes.slice();
  Object.defineProperty(short, "byteLength", { value: 16 });
  using a = Module.load(short, "cuda:0");
  a.function("add_one_f32", ["ptr", "u32"]);
  const moving = bytes.slice();
  let read = 0;
  Object.defineProperty(moving, "byteLength", { get: () => (read++, structuredClone(moving.buffer, { transfer: [moving.buffer] }), 1 << 20) });
  using b = Module.load(moving, "cuda:0");
  b.function("scale_add_f32", ["ptr", "ptr", "f32", "f32", "u32"]);
  assertSame(read, 0);
  assertThrows(() => Module.load(new Uint8Array(0), "cuda:0"), MtcError, "the image is empty");
});

reentrancyTest("N2: a hole or undefined in a kernel's declaration is refused by module.function, naming the parameter", () => {
  using module = Module.load(KERNELS_PTX, "cuda:0");
  const invalid = (params: unknown, text: string) => {
    const e = assertThrows(() => module.function("add_one_f32", params as never), MtcError, text);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
    assert(e.message.startsWith('Module.function("add_one_f32"): '), e.message);
  };
  invalid(["ptr", , "u64"], "parameter 1 has no type (a hole or undefined in the list)");
  invalid(new Array(2), "parameter 0 has no type");
  invalid(["ptr", undefined], "parameter 1 has no type");
  invalid(new Array(5000).fill("u32"), "5000 parameters; a kernel takes at most 4096");
  // The caller's code in the declaration runs before the module is used.
  const params = argsWithGetter(["ptr", "u32"], 1, () => module.dispose()) as unknown as string[];
  assertSame(assertThrows(() => module.function("add_one_f32", params as never), MtcError, "was disposed").code, "MTC_ERR_INVALID_STATE");
});

reentrancyTest("N3: a number past 2^53 for a 64-bit argument is refused as not a safe integer; a bigint is exact", () => {
  using stream = Stream.create("cuda:0");
  using module = Module.load(WIDE_PTX, "cuda:0");
  const wide = module.function("wide", ["u64", "i64", "ptr"]);
  const launch = (args: unknown[]) => wide.launch({ stream, grid: 1, block: 1 }, args as never);
  const invalid = (args: unknown[], text: string) => {
    const e = assertThrows(() => launch(args), MtcError, text);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
  };
  invalid([2 ** 53, 0, null], "argument 0 (u64): 9007199254740992 is not a safe integer");
  invalid([2 ** 53, 0, null], "pass a bigint");
  invalid([0, -(2 ** 60), null], "argument 1 (i64): -1152921504606847000 is not a safe integer");
  invalid([0, 0, 2 ** 60], "argument 2 (ptr): 1152921504606847000 is not a safe integer");
  invalid([2 ** 64, 0, null], "argument 0 (u64): 18446744073709552000 is not an integer 0 … 18446744073709551615");
  invalid([-(2 ** 60), 0, null], "argument 0 (u64): -1152921504606847000 is not an integer 0");
  invalid([0, 1.5, null], "argument 1 (i64): 1.5 is not an integer");
  const u32 = module.function("wide", ["u32", "i64", "ptr"]);
  assertThrows(() => u32.launch({ stream, grid: 1, block: 1 }, [2 ** 53, 0, null]), MtcError, "argument 0 (u32): 9007199254740992 is not an integer 0 … 4294967295");
  launch([2n ** 53n + 1n, -(2n ** 53n) - 1n, 2n ** 60n + 1n]);
  const params = new DataView(fakeDriver()!.lastLaunch()!.params.buffer);
  assertSame(params.getBigUint64(0, true), 2n ** 53n + 1n);
  assertSame(params.getBigInt64(8, true), -(2n ** 53n) - 1n);
  assertSame(params.getBigUint64(16, true), 2n ** 60n + 1n);
});
