// What errors say, where the library read something it could not use:
// Arena#consolidate over every leaf it cannot read (an MtcError with the
// leaf's path, never a bare TypeError, never an empty copy; nothing taken);
// the setters' range messages against the ranges they accept (the edges
// accepted); unknown option names of pinnedTensor, pinnedArray,
// Arena.create and Kernel.launch refused, naming the option, as startCopy
// refuses its own.
import {
  Arena,
  DeviceTensor,
  disposeAll,
  Module,
  MtcError,
  pinnedArray,
  pinnedTensor,
  poolStats,
  releaseHostOutput,
  setPinnedHeldLimit,
  setPinnedPoolLimit,
  Stream,
  Tensor,
} from "../../ts/mod.ts";
import { KERNELS_PTX } from "../../examples/kernel_ptx.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { assertPoolsBack, poolMark } from "./fixtures/checks.ts";
import { assert, assertSame, assertThrows, test } from "./harness.ts";

const skip = skipWithoutDriver;

/** A Float32Array whose buffer was transferred away. */
function detachedArray(length: number): Float32Array {
  const a = new Float32Array(length);
  structuredClone(a.buffer, { transfer: [a.buffer] });
  return a;
}

/** Leaves consolidate cannot read: what each is, the batch, its path, and what the message says. */
function unreadable(arena: Arena): [string, () => unknown, string, string][] {
  return [
    ["a detached array", () => ({ a: [1, detachedArray(4)] }), ".a[1]", "its ArrayBuffer was detached"],
    ["a detached empty array", () => ({ a: detachedArray(0) }), ".a", "its ArrayBuffer was detached"],
    ["a Tensor over a detached array", () => {
      const t = new Tensor(new Float32Array(6), [2, 3]);
      structuredClone(t.data.buffer, { transfer: [t.data.buffer as ArrayBuffer] });
      return { cam: { t } };
    }, ".cam.t", "the Tensor's ArrayBuffer was detached"],
    ["a released pinned array", () => {
      const p = pinnedArray("float32", 4);
      releaseHostOutput(p);
      return { b: { p } };
    }, ".b.p", "its pinned memory was released"],
    ["a disposed pinned tensor", () => {
      const t = pinnedTensor("int32", [2, 2]);
      t.dispose();
      return { m: new Map([["x", t]]) };
    }, '.m["x"]', "the Tensor's pinned memory was released"],
    ["an arena tensor from before a reset", () => {
      const t = arena.tensor("float32", [2]);
      arena.tryReset();
      return { s: [t] };
    }, ".s[0]", "the Tensor's pinned memory was released"],
    ["a view out of bounds of its shrunk resizable buffer", () => {
      const buffer = new ArrayBuffer(16, { maxByteLength: 64 });
      const view = new Float32Array(buffer, 0, 4);
      buffer.resize(8);
      return { o: view };
    }, ".o", "out of bounds of its resizable ArrayBuffer"],
    ["a disposed DeviceTensor", () => {
      const d = DeviceTensor.zeros([4], "float32", "cuda:0");
      d.dispose();
      return { d };
    }, ".d", "this DeviceTensor was disposed"],
    ["a forged DeviceTensor", () => ({ f: Object.create(DeviceTensor.prototype) }), ".f", "not a DeviceTensor made by this library"],
  ];
}

test("error quality: Arena#consolidate over a leaf it cannot read is an MtcError naming the leaf's path; nothing is taken", () => {
  const mark = poolMark();
  {
    using arena = Arena.create(1 << 16);
    for (const [what, make, path, says] of unreadable(arena)) {
      arena.tryReset();
      const batch = make();
      arena.array("uint8", 3); // something taken before: it must stay as it is
      const e = assertThrows(() => arena.consolidate(batch), MtcError, says);
      // Memory given back (a use after dispose) is MTC_ERR_INVALID_STATE, the rest a bad argument.
      const gone = says.includes("was released") || says.includes("was disposed");
      assertSame(e.code, gone ? "MTC_ERR_INVALID_STATE" : "MTC_ERR_INVALID_ARGUMENT", `${what}: ${e.message}`);
      assertSame(e.path, path, `${what}: ${e.message}`);
      assert(e.message.includes("Arena.consolidate"), `${what}: ${e.message}`);
      assertSame(arena.used, 3, `${what}: nothing taken`);
    }
    // Empty leaves that are readable are copied as empty ones, and a live DeviceTensor is kept as it is.
    arena.tryReset();
    using live = DeviceTensor.zeros([2], "float32", "cuda:0");
    const out = arena.consolidate({ z: new Float32Array(0), t: new Tensor(new Int32Array(0), [0, 3]), live }) as { z: Float32Array; t: Tensor; live: DeviceTensor };
    assert(out.z instanceof Float32Array && out.z.length === 0, "an empty Float32Array");
    assertSame(out.t.shape.join(","), "0,3");
    assertSame(out.live, live);
  }
  assertPoolsBack(mark, "consolidate");
}, { skip });

test("error quality: setPinnedHeldLimit and setPinnedPoolLimit name the range they accept, and accept its edges", () => {
  const before = poolStats();
  const bad: unknown[] = [0, -1, 2 ** 20 - 1, 2 ** 50 + 1, 2 ** 20 + 0.5, NaN, Infinity, "4m", 4n << 20n, null, { valueOf: () => 2 ** 21 }];
  const loud = { toString: () => { throw new Error("toString ran"); } };
  try {
    for (const [name, set] of [["setPinnedHeldLimit", setPinnedHeldLimit], ["setPinnedPoolLimit", setPinnedPoolLimit]] as const) {
      for (const value of [...bad, loud]) {
        const e = assertThrows(() => set(value as number), MtcError, `${name}: bytes must be an integer from 1 MiB to 1 PiB`);
        assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
      }
      for (const edge of [2 ** 20, 2 ** 50]) set(edge);
    }
  } finally {
    setPinnedHeldLimit(before.pinnedHeldLimitBytes);
    setPinnedPoolLimit(before.pinnedLimitBytes);
  }
  assertSame(poolStats().pinnedHeldLimitBytes, before.pinnedHeldLimitBytes);
}, { skip });

test("error quality: pinnedTensor, pinnedArray and Arena.create refuse unknown option names and options that are no object", () => {
  const mark = poolMark();
  const calls: [string, (options: unknown) => unknown][] = [
    ["pinnedTensor", (o) => pinnedTensor("float32", [2, 2], o as never)],
    ["pinnedArray", (o) => pinnedArray("float32", 4, o as never)],
    ["pinnedArray", (o) => pinnedArray("float32", 0, o as never)], // no memory to take: checked all the same
    ["Arena.create", (o) => Arena.create(4096, o as never)],
  ];
  for (const [name, call] of calls) {
    const e = assertThrows(() => call({ devcie: "cuda:1" }), MtcError, `${name}: unknown option "devcie" (known: device)`);
    assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
    assertThrows(() => call(null), MtcError, `${name}: options must be an object, got null`);
    assertThrows(() => call(7), MtcError, `${name}: options must be an object, got number`);
    const made = call({ device: "cuda:1" }); // the known one still works
    if (made instanceof Arena) made.dispose();
    else disposeAll(made);
  }
  assertPoolsBack(mark, "pinned options");
}, { skip });

test("error quality: Kernel.launch refuses an unknown option name (a misspelt sharedBytes would launch with none)", () => {
  using stream = Stream.create("cuda:0");
  using module = Module.load(KERNELS_PTX, "cuda:0");
  using x = DeviceTensor.zeros([4], "float32", "cuda:0");
  const addOne = module.function("add_one_f32", ["ptr", "u32"]);
  const e = assertThrows(() => addOne.launch({ stream, grid: 1, block: 4, sharedMem: 1024 } as never, [x, 4]), MtcError, 'add_one_f32.launch: unknown option "sharedMem"');
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT");
  addOne.launch({ stream, grid: 1, block: 4, sharedBytes: 0 }, [x, 4]);
  stream.synchronize();
  assertSame(Array.from(x.toHost() as Float32Array).join(","), "1,1,1,1");
}, { skip });
