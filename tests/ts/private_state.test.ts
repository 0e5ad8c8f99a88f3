// Only private state is trusted, through the emulated driver (two devices).
// A DeviceTensor's fields are getters over its private state: assigning
// them throws, and copies, launches and DLPack read the state itself, so
// fields shadowed by own properties or a subclass's getters change nothing
// (before, a reassigned byteLength made copies read and write the
// neighbouring tensor). Host arrays are measured by the engine's getters,
// and pinned outputs are released by the engine's own transfer. An object
// that only has DeviceTensor's prototype is refused at every entry point
// with an MtcError naming its leaf (before: a bare TypeError).
import {
  copyInto,
  DeviceTensor,
  deleteDLPack,
  disposeAll,
  isPinnedHostOutput,
  Module,
  MtcError,
  prefetch,
  releaseDLPack,
  releaseHostOutput,
  startCopy,
  Stream,
  Tensor,
  toDLPack,
  ToDevice,
} from "../../ts/mod.ts";
import { debugFill } from "../../ts/testing.ts";
import { library } from "../../ts/ffi/library.ts";
import { fakeDriver, skipWithoutDriver } from "./fake_driver.ts";
import { assertPoolsBack, poolMark } from "./fixtures/checks.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, test } from "./harness.ts";

const stateTest = (name: string, fn: () => void | Promise<void>) => test(`private state: ${name}`, fn, { skip: skipWithoutDriver });

const FIELDS = ["address", "shape", "dtype", "device", "deviceIndex", "byteLength", "block", "offset", "packed", "disposed"] as const;

/** Two float32 [4] tensors packed next to each other in one block of cuda:0: [1, 2, 3, 4] then [5, 6, 7, 8]. */
function neighbours(): { a: DeviceTensor; b: DeviceTensor } {
  const out = startCopy({ a: new Float32Array([1, 2, 3, 4]), b: new Float32Array([5, 6, 7, 8]) }, "cuda:0").get();
  assertSame(out.b.address, out.a.address + 16, "b right after a");
  return out;
}

/** Own properties over the getters, as a careless caller (or a library patching objects) might leave them. */
function shadow(target: object, fields: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(fields)) Object.defineProperty(target, field, { value, configurable: true });
}

/** What `a` could be made to claim: twice its bytes, b's address, another dtype and device. */
function lies(b: DeviceTensor): Record<string, unknown> {
  return { byteLength: 32, address: b.address, shape: [8], dtype: "int32", deviceIndex: 1, device: "cuda:1", offset: 16, block: 0 };
}

function floats(value: unknown): number[] {
  return Array.from(value as Float32Array);
}

/** A kernel that only records its launches (the emulated driver keeps the parameters). */
const RECORDING_PTX = `
.version 8.0
.target sm_80
.address_size 64
.visible .entry one_pointer(.param .u64 p) { ret; }
`;

stateTest("every public field of a DeviceTensor is read-only: assigning throws and changes nothing", () => {
  const { a, b } = neighbours();
  const before = FIELDS.map((f) => a[f]);
  for (const field of FIELDS) {
    assertThrows(() => {
      (a as unknown as Record<string, unknown>)[field] = field === "shape" ? [8] : 32;
    }, TypeError);
  }
  assertEquals(FIELDS.map((f) => a[f]), before);
  // A launch passes the tensor's own address.
  using stream = Stream.create("cuda:0");
  using module = Module.load(RECORDING_PTX, "cuda:0");
  module.function("one_pointer", ["ptr"]).launch({ stream, grid: 1, block: 1 }, [a]);
  stream.synchronize();
  const launch = fakeDriver()!.lastLaunch()!;
  assertSame(new DataView(launch.params.buffer).getBigUint64(0, true), BigInt(before[0] as number));
  disposeAll([a, b]);
});

stateTest("copies read a DeviceTensor's own state, not fields shadowed by own properties", async () => {
  const mark = poolMark();
  const { a, b } = neighbours();
  const own = a.address;
  shadow(a, lies(b));
  // startCopy, every direction: a's 16 bytes, shape [4], float32.
  const back = startCopy({ a }, "cpu").get();
  assertEquals(floats(back.a), [1, 2, 3, 4]);
  const onOne = startCopy({ a }, "cuda:1").get();
  assert(onOne.a !== a && onOne.a.device === "cuda:1", "copied to cuda:1, not taken as already there");
  assertEquals([onOne.a.byteLength, onOne.a.shape, onOne.a.dtype], [16, [4], "float32"]);
  assertEquals(floats(onOne.a.toHost()), [1, 2, 3, 4]);
  assertEquals(floats(a.toHost()), [1, 2, 3, 4]);
  const asTensor = a.toTensor();
  assertEquals([asTensor.shape, asTensor.dtype], [[4], "float32"]);
  // copyInto, both directions: a as a source, and as a destination that must not reach b.
  const host = new Float32Array(4);
  await copyInto({ a }, { a: host });
  assertEquals(floats(host), [1, 2, 3, 4]);
  const e = assertThrows(() => copyInto({ a: new Float32Array(8).fill(-1) }, { a }), MtcError, "the destination's shape is [4] but the leaf's is [8]");
  assertSame(e.path, ".a");
  await copyInto({ a: new Float32Array([9, 9, 9, 9]) }, { a });
  assertEquals(floats(a.toHost()), [9, 9, 9, 9]);
  assertEquals(floats(b.toHost()), [5, 6, 7, 8], "b untouched");
  // DLPack: the managed tensor describes a as it is.
  const managed = toDLPack(a);
  const header = new Uint8Array(80);
  library().backend.copyFromAddress(managed, header);
  const view = new DataView(header.buffer);
  const dims = new BigInt64Array(view.getInt32(48, true));
  library().backend.copyFromAddress(Number(view.getBigUint64(56, true)), new Uint8Array(dims.buffer));
  const data = Number(view.getBigUint64(32, true)) + Number(view.getBigUint64(72, true));
  assertEquals([data, view.getInt32(44, true), view.getUint8(52), view.getUint8(53), Array.from(dims, Number)], [own, 0, 2, 32, [4]]);
  deleteDLPack(managed);
  disposeAll([a, b, back, onOne]);
  assertPoolsBack(mark, "shadowed fields");
});

stateTest("a subclass's getters (a prototype swapped under a real tensor) change no copy either", () => {
  const { a, b } = neighbours();
  class Liar extends (DeviceTensor as unknown as new () => DeviceTensor) { // its constructor is private: only the prototype is used
    override get byteLength(): number {
      return 32;
    }
    override get address(): number {
      return b.address;
    }
    override get deviceIndex(): number {
      return 1;
    }
  }
  Object.setPrototypeOf(a, Liar.prototype);
  assertSame(a.byteLength, 32, "the caller sees the subclass's getter");
  assertEquals(floats(startCopy(a, "cpu").get()), [1, 2, 3, 4]);
  const onOne = startCopy(a, "cuda:1").get();
  assertEquals([onOne.byteLength, floats(onOne.toHost())], [16, [1, 2, 3, 4]]);
  disposeAll([a, b, onOne]);
});

stateTest("host arrays are measured by the engine: an own byteLength neither widens a copy nor a strided layout", () => {
  const x = new Float32Array([1, 2, 3, 4]);
  shadow(x, { byteLength: 4096 });
  const onGpu = startCopy({ x, t: new Tensor(x, [2, 2]) }, "cuda:0").get();
  assertEquals([onGpu.x.byteLength, onGpu.x.shape, onGpu.t.byteLength, onGpu.t.shape], [16, [4], 16, [2, 2]]);
  assertEquals(floats(onGpu.x.toHost()), [1, 2, 3, 4]);
  disposeAll(onGpu);
  // A strided Tensor whose storage claims more than it holds, and whose layout was changed to read there.
  const s = new Tensor(new Float32Array(8), [2, 2], "float32", { strides: [4, 1] });
  shadow(s.data, { byteLength: 1 << 20, BYTES_PER_ELEMENT: 1 });
  shadow(s, { strides: [1 << 16, 1] });
  const e = assertThrows(() => startCopy({ s }, "cuda:0"), MtcError, "outside the 8-element storage");
  assertSame(e.path, ".s");
});

stateTest("pinned host outputs are released by the engine's own transfer and buffer, whatever their own properties say", async () => {
  const { a, b } = neighbours();
  const back = await startCopy({ a, b }, "cpu") as unknown as { a: Float32Array; b: Float32Array };
  const buffer = back.a.buffer;
  shadow(buffer, { transfer: () => buffer, detached: true });
  shadow(back.b, { buffer: new ArrayBuffer(16) });
  assert(isPinnedHostOutput(back.b), "a pinned output, by its real buffer");
  assertSame(releaseHostOutput(back.b), 1, "released");
  assertSame(back.a.length, 0, "every view of the block emptied");
  assertSame(isPinnedHostOutput(back.a), false);
  disposeAll([a, b]);
});

// ------------------------------------------------------------ forged objects

/** A real tensor, for the Proxy among the forgeries (a Proxy has none of its target's private state). */
let proxied: DeviceTensor | null = null;

/** Objects that pass `instanceof DeviceTensor` without being made by its constructor. */
function forgeries(): [string, DeviceTensor][] {
  class Sub extends (DeviceTensor as unknown as new () => DeviceTensor) {} // its constructor is private: only the prototype is used
  proxied ??= DeviceTensor.zeros([4], "float32", "cuda:0");
  return [
    ["Object.create", Object.create(DeviceTensor.prototype) as DeviceTensor],
    ["a subclass's prototype", Object.create(Sub.prototype) as DeviceTensor],
    ["a Proxy of a real one", new Proxy(proxied, {})],
  ];
}

const NOT_OURS = "not a DeviceTensor made by this library";

function expectRefused(fn: () => unknown, path: string, what: string): void {
  const e = assertThrows(fn, MtcError, NOT_OURS);
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", what);
  assertSame(e.path, path, `${what}: ${e.message}`);
}

stateTest("a forged DeviceTensor as a startCopy leaf is an MtcError naming its path, in every direction", async () => {
  for (const [how, forged] of forgeries()) {
    const mark = poolMark();
    const batch = [0, 1, 2, 3].map((i) => ({ cams: [new Float32Array(i + 1), DeviceTensor.zeros([2], "int32", "cuda:1"), { depths: new Int8Array(3) }] }));
    (batch[3]!.cams[2] as { depths: unknown }).depths = forged;
    for (const target of ["cuda:0", "cuda:1", "cpu"] as const) {
      expectRefused(() => startCopy(batch, target), "[3].cams[2].depths", `${how} to ${target}`);
    }
    expectRefused(() => new ToDevice("cuda:1", "cuda:0").forward(batch), "[3].cams[2].depths", `${how} through ToDevice`);
    await assertRejects(() => prefetch([batch], "cuda:0").next(), MtcError, NOT_OURS);
    for (const sample of batch) disposeAll(sample);
    assertPoolsBack(mark, how);
  }
});

stateTest("a forged DeviceTensor as a copyInto source or destination is an MtcError naming its path", () => {
  for (const [how, forged] of forgeries()) {
    const real = DeviceTensor.zeros([4], "float32", "cuda:0");
    const e = assertThrows(() => copyInto({ x: { y: forged } }, { x: { y: real } }), MtcError, `the source is ${NOT_OURS}`);
    assertSame(e.path, ".x.y", how);
    const d = assertThrows(() => copyInto({ x: { y: real } }, { x: { y: forged } }), MtcError, `the destination is ${NOT_OURS}`);
    assertSame(d.path, ".x.y", how);
    const host = assertThrows(() => copyInto([new Float32Array(4)], [forged]), MtcError, `the destination is ${NOT_OURS}`);
    assertSame(host.path, "[0]", how);
    real.dispose();
  }
});

stateTest("a forged DeviceTensor elsewhere: its methods, DLPack, disposeAll, releaseHostOutput, debugFill", () => {
  using stream = Stream.create("cuda:0");
  for (const [how, forged] of forgeries()) {
    const methods: [string, () => unknown][] = [
      ["toHost", () => DeviceTensor.prototype.toHost.call(forged)],
      ["toTensor", () => DeviceTensor.prototype.toTensor.call(forged)],
      ["dispose", () => DeviceTensor.prototype.dispose.call(forged)],
      ["disposed", () => forged.disposed],
      ["Symbol.dispose", () => DeviceTensor.prototype[Symbol.dispose].call(forged)],
    ];
    for (const [method, call] of methods) {
      const e = assertThrows(call, MtcError, `DeviceTensor.${method === "Symbol.dispose" ? "dispose" : method}: this is ${NOT_OURS}`);
      assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", `${how}: ${method}`);
    }
    assertThrows(() => toDLPack(forged), MtcError, `toDLPack: the argument is ${NOT_OURS}`);
    assertThrows(() => debugFill(stream, forged, 1), MtcError, `debugFill: the range is ${NOT_OURS}`);
    // Cleanup functions leave what is not theirs alone, and still do their work.
    const real = DeviceTensor.zeros([4], "float32", "cuda:0");
    assertSame(releaseDLPack(forged), false, how);
    assertSame(releaseHostOutput({ forged }), 0, how);
    assertSame(disposeAll([forged, { real }]), 1, how);
    assert(real.disposed, `${how}: the real tensor beside it was disposed`);
  }
});
