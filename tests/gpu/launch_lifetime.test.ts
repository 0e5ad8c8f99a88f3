// The lifetimes a kernel launch depends on, against the real driver: the
// caller's code run inside launch (getters on args and options, Proxy traps)
// that disposes the module, the stream or a tensor already read gives an
// MtcError and launches nothing, instead of handing the driver an unloaded
// module, a destroyed stream or freed memory; a launch that goes ahead holds
// its tensors' memory until the stream has passed it, and nothing more. The
// emulated-driver versions are in tests/ts/launch_reentrancy.test.ts.
import { DeviceTensor, Module, MtcError, poolStats, settleLaunches, Stream } from "../../ts/mod.ts";
import { KERNELS_PTX } from "../../examples/kernel_ptx.ts";
import { assertEquals, assertSame, assertThrows } from "../ts/harness.ts";
import { DEVICE, gpuTest } from "./gpu_env.ts";

interface Setup {
  stream: Stream;
  module: Module;
  t: DeviceTensor;
  launch(options: object, args: unknown): void;
  [Symbol.dispose](): void;
}

function setup(): Setup {
  const stream = Stream.create(DEVICE);
  const module = Module.load(KERNELS_PTX, DEVICE);
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  const t = DeviceTensor.zeros([1024], "float32", DEVICE);
  return {
    stream,
    module,
    t,
    launch: (options, args) => addOne.launch(options as never, args as never),
    [Symbol.dispose]() {
      t.dispose();
      module.dispose();
      stream.dispose();
    },
  };
}

function withGetter<T extends object>(target: T, key: PropertyKey, effect: () => void): T {
  const value = (target as Record<PropertyKey, unknown>)[key];
  Object.defineProperty(target, key, { get: () => (effect(), value), enumerable: true });
  return target;
}

function trapOn<T extends object>(target: T, key: string, effect: () => void): T {
  return new Proxy(target, {
    get(t, k, receiver) {
      if (k === key) effect();
      return Reflect.get(t, k, receiver);
    },
  });
}

/** The places the caller's code can run inside launch, each running `effect` there. */
const POSITIONS: [string, (s: Setup, effect: () => void) => void][] = [
  ["a getter on args[1]", (s, effect) => s.launch({ stream: s.stream, grid: 4, block: 256 }, withGetter([s.t, 1024], 1, effect))],
  ["a Proxy trap on args[1]", (s, effect) => s.launch({ stream: s.stream, grid: 4, block: 256 }, trapOn([s.t, 1024], "1", effect))],
  ["a getter on options.grid", (s, effect) => s.launch(withGetter({ stream: s.stream, grid: 4, block: 256 }, "grid", effect), [s.t, 1024])],
  ["a getter on options.block", (s, effect) => s.launch(withGetter({ stream: s.stream, grid: 4, block: 256 }, "block", effect), [s.t, 1024])],
  ["a getter on options.sharedBytes", (s, effect) => s.launch(withGetter({ stream: s.stream, grid: 4, block: 256, sharedBytes: 0 }, "sharedBytes", effect), [s.t, 1024])],
];

const TARGETS: [string, (s: Setup) => void, string][] = [
  ["the module", (s) => s.module.dispose(), "this Module (cuda:0) was disposed"],
  ["the stream", (s) => s.stream.dispose(), "this Stream (cuda:0) was disposed"],
  ["the tensor argument", (s) => s.t.dispose(), "add_one_f32.launch: argument 0 (ptr): the tensor was disposed"],
];

gpuTest("launch lifetime: the caller's code that disposes what a launch uses gives an MtcError, never a crash", () => {
  settleLaunches(true);
  const before = poolStats().blocksLive;
  for (const [what, dispose, text] of TARGETS) {
    for (const [where, launch] of POSITIONS) {
      using s = setup();
      const e = assertThrows(() => launch(s, () => dispose(s)), MtcError, text);
      assertSame(e.code, "MTC_ERR_INVALID_STATE", `${where}, disposing ${what}: ${e.message}`);
      if (!s.t.disposed) assertSame((s.t.toHost() as Float32Array).some((v) => v !== 0), false, `${where}: nothing was launched`);
    }
  }
  settleLaunches(true);
  assertSame(poolStats().blocksLive, before, "every block freed once, none held");

  // The device is still sound: a fresh tensor computes exactly.
  using s = setup();
  s.launch({ stream: s.stream, grid: 4, block: 256 }, [s.t, 1024]);
  s.stream.synchronize();
  assertSame((s.t.toHost() as Float32Array).every((v) => v === 1), true);
});

gpuTest("launch lifetime: a launch that goes ahead holds its tensors until the stream passed it, then gives them back", () => {
  settleLaunches(true);
  const before = poolStats().blocksLive;
  using stream = Stream.create(DEVICE);
  using module = Module.load(KERNELS_PTX, DEVICE);
  const scaleAdd = module.function("scale_add_f32", ["ptr", "ptr", "f32", "f32", "u32"]);
  const n = 4 << 20;
  const x = DeviceTensor.zeros([n], "float32", DEVICE);
  using y = DeviceTensor.empty([n], "float32", DEVICE);
  // The caller's getter runs, harmlessly, inside each launch.
  for (let i = 0; i < 10; i++) scaleAdd.launch({ stream, grid: n / 256, block: 256 }, withGetter([x, y, 2, 3, n], 4, () => {}));
  x.dispose(); // the launches hold x's memory
  stream.synchronize();
  assertSame(settleLaunches(true), 0);
  assertSame(poolStats().blocksLive, before + 1, "y only: the launches gave x back, and no share of theirs stayed");
  const got = y.toHost() as Float32Array;
  assertEquals([got[0], got[n - 1]], [3, 3]);
});

gpuTest("launch lifetime: a forged DeviceTensor is an MtcError naming the argument", () => {
  using s = setup();
  const forged = Object.create(DeviceTensor.prototype) as DeviceTensor;
  for (const value of [forged, new Proxy(s.t, {}), { address: s.t.address, deviceIndex: 0, block: s.t.block, disposed: false }]) {
    const e = assertThrows(() => s.launch({ stream: s.stream, grid: 4, block: 256 }, [value, 1024]), MtcError, "add_one_f32.launch: argument 0 (ptr): ");
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  }
});
