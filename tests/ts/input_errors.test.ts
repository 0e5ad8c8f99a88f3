// Clear errors for malformed input, through the emulated driver (two
// devices): every public function taking an options object refuses a
// non-object and unknown names as startCopy does (before, warmUp(dev, null)
// threw a TypeError and its unknown names were ignored); shape errors show
// the values as given ("4" quoted, before shown as 4); a broadcast Tensor
// whose element count no number holds exactly is refused when made; and
// switches in the environment read "off" as off (before, MTC_TRACE=off and
// MTC_TRACE_FFI=true did the opposite of what they say).
import { copyInto, DeviceTensor, MtcError, prefetch, startCopy, Stream, Tensor, ToDevice, warmUp } from "../../ts/mod.ts";
import { skipWithoutDriver } from "./fake_driver.ts";
import { runScript } from "./fixtures/spawn.ts";
import { assert, assertEquals, assertRejects, assertSame, assertThrows, test } from "./harness.ts";

const inputTest = (name: string, fn: () => void | Promise<void>, timeout?: number) =>
  test(`input errors: ${name}`, fn, { skip: skipWithoutDriver, timeout });

/** Expects MTC_ERR_INVALID_ARGUMENT whose message includes `includes`. */
function invalid(fn: () => unknown, includes: string): MtcError {
  const e = assertThrows(fn, MtcError, includes);
  assertSame(e.code, "MTC_ERR_INVALID_ARGUMENT", e.message);
  return e;
}

inputTest("every function taking options refuses a non-object and unknown names, as startCopy does", async () => {
  const batch = { x: new Float32Array(4) };
  for (const bad of [null, 16, "fast"] as unknown[]) {
    const got = bad === null ? "null" : typeof bad;
    invalid(() => startCopy(batch, "cuda:0", bad as never), `options must be an object, got ${got}`);
    invalid(() => copyInto(batch, { x: new Float32Array(4) }, bad as never), `options must be an object, got ${got}`);
    invalid(() => warmUp("cuda:0", bad as never), `warmUp: options must be an object, got ${got}`);
    await assertRejects(() => prefetch([batch], "cuda:0", bad as never).next(), MtcError, `prefetch: options must be an object, got ${got}`);
    invalid(() => new Tensor(new Float32Array(4), [4], "float32", bad as never), `Tensor: the layout must be an object, got ${got}`);
  }
  invalid(() => startCopy(batch, "cuda:0", { alignment: 16 } as never), 'unknown option "alignment" (known: usePinnedStaging,');
  const unknown = invalid(() => warmUp("cuda:0", { pinned: 1 << 20 } as never), 'warmUp: unknown option "pinned"');
  assert(unknown.message.includes("pinnedBytes, pinnedBufferBytes, deviceBytes"), unknown.message);
  await assertRejects(() => prefetch([batch], "cuda:0", { depht: 3 } as never).next(), MtcError, 'prefetch: unknown option "depht"');
  invalid(() => new Tensor(new Float32Array(8), [2, 2], "float32", { stride: [4, 1] } as never), 'Tensor: unknown layout field "stride"');
  invalid(() => new ToDevice({ device: "cuda:0", stream: null } as never, "cuda:1"), 'ToDevice source: unknown DeviceSpec field "stream"');
  // The names each takes still work, and a value is still checked by its own rule.
  warmUp("cuda:0", { pinnedBytes: 0, pinnedBufferBytes: 1 << 20, deviceBytes: 0 });
  invalid(() => warmUp("cuda:0", { deviceBytes: "1" as never }), 'warmUp: deviceBytes must be a whole number of bytes, got "1"');
  const strided = new Tensor(new Float32Array(8), [2, 2], "float32", { strides: [4, 1], offset: 1 });
  assertEquals([strided.strides, strided.offset], [[4, 1], 1]);
});

inputTest("a ToDevice reads its specs once: changing them or its fields afterwards changes nothing", async () => {
  using c1 = Stream.create("cuda:1");
  const spec = { device: "cuda:1" as const, computeStream: c1 };
  const op = new ToDevice("cpu", spec);
  using c0 = Stream.create("cuda:0");
  (spec as { computeStream: Stream }).computeStream = c0; // a stream of another device, never checked
  assertThrows(() => {
    (op as unknown as { target: string }).target = "cuda:0";
  }, TypeError);
  const out = op.forward({ x: new Float32Array([1, 2]) });
  assertSame(out.x.device, "cuda:1");
  assertEquals(Array.from(out.x.toHost() as Float32Array), [1, 2]);
  // Its adjoint is made from the specs as they were read, too (before: read again, and refused).
  const back = op.adjoint().forward(out);
  assertEquals(Array.from(back.x as Float32Array), [1, 2]);
  out.x.dispose();
});

inputTest("shape errors show the extents as given: strings quoted, other values by what they are", () => {
  const cases: [unknown[], string][] = [
    [["4"], '["4"]'],
    [[2, "3"], '[2, "3"]'],
    [[1.5, 2], "[1.5, 2]"],
    [[-1], "[-1]"],
    [[NaN, Infinity], "[NaN, Infinity]"],
    [[2n], "[2n]"],
    [[null, undefined], "[null, undefined]"],
    [[{}, [2]], "[an object, an array]"],
    [[2 ** 53], "[9007199254740992]"],
  ];
  for (const [shape, shown] of cases) {
    invalid(() => DeviceTensor.empty(shape as number[], "float32", "cuda:0"), `DeviceTensor.empty: invalid shape ${shown}: extents must be integers >= 0`);
    invalid(() => DeviceTensor.zeros(shape as number[], "int8", "cuda:1"), `DeviceTensor.zeros: invalid shape ${shown}`);
    invalid(() => new Tensor(new Float32Array(4), shape as number[]), `invalid shape ${shown}: extents must be integers >= 0`);
  }
  invalid(() => DeviceTensor.empty("4" as never, "float32", "cuda:0"), 'the shape must be an array of integers >= 0, got "4"');
  invalid(() => new Tensor(new Float32Array(4), { length: 1 } as never), "Tensor shape must be an array of integers, got an object");
  // A shape reassigned after construction, at the copy: its path and what it holds.
  const t = new Tensor(new Float32Array(6), [2, 3]);
  Object.assign(t, { shape: [2, "3"] });
  const e = invalid(() => startCopy({ cam: { t } }, "cuda:0"), `the Tensor's shape [2, "3"] is not an array of integers >= 0`);
  assertSame(e.path, ".cam.t");
  // copyInto's shape checks name both shapes.
  using d = DeviceTensor.zeros([2, 3], "float32", "cuda:0");
  invalid(() => copyInto({ a: new Tensor(new Float32Array(6), [3, 2]) }, { a: d }), "the destination's shape is [2, 3] but the leaf's is [3, 2]");
});

inputTest("a Tensor reads its shape's length and each extent once, keeps a frozen copy, and never the caller's array", () => {
  const reads: string[] = [];
  const shape = new Proxy([2, 3], {
    get(target, key, receiver) {
      if (typeof key === "string") reads.push(key);
      return Reflect.get(target, key, receiver);
    },
  });
  const t = new Tensor(new Float32Array(6), shape);
  assertEquals(reads, ["length", "0", "1"], "no species, no second read");
  assertEquals([...t.shape], [2, 3]);
  assert(Object.isFrozen(t.shape) && t.shape !== shape);
  // An extent that changes on each read: what was checked (6 elements) is what is kept.
  let n = 0;
  const shifty = [2, 0];
  Object.defineProperty(shifty, 1, { get: () => (n++ === 0 ? 3 : -1) });
  assertEquals([...new Tensor(new Float32Array(6), shifty).shape], [2, 3]);
  // A frozen shape of the library's (another Tensor's) and a subclass of Array are taken as their extents.
  class Dims extends Array<number> {}
  assertEquals([...new Tensor(new Uint8Array(6), t.shape, "bool").shape], [2, 3]);
  assertEquals([...new Tensor(new Uint8Array(6), Dims.from([3, 2])).shape], [3, 2]);
  invalid(() => new Tensor(new Float32Array(4), Object.freeze([2, "2"]) as never), 'invalid shape [2, "2"]');
});

inputTest("a broadcast Tensor with more elements than a number holds exactly is refused when made, and at the copy", () => {
  const one = new Float32Array(1);
  // 2^27 x 2^27 float32 elements: 2^56 bytes, past 2^53 - 1; size and byteLength could not be exact.
  invalid(() => new Tensor(one, [2 ** 27, 2 ** 27], "float32", { strides: [0, 0] }), "shape [134217728, 134217728] of float32 is too large");
  invalid(() => new Tensor(new Float64Array(1), [3, 2 ** 50], "float64", { strides: [0, 0] }), "too large");
  // The largest that fits is accepted: 2^50 float32 elements, 2^52 bytes.
  const big = new Tensor(one, [2 ** 25, 2 ** 25], "float32", { strides: [0, 0] });
  assertEquals([big.size, big.byteLength], [2 ** 50, 2 ** 52]);
  // As DeviceTensor.empty refuses it.
  invalid(() => DeviceTensor.empty([2 ** 27, 2 ** 27], "float32", "cuda:0"), "too large");
  // A shape made that large after construction is refused at the copy, with its path.
  const small = new Tensor(one, [2, 2], "float32", { strides: [0, 0] });
  Object.assign(small, { shape: [2 ** 27, 2 ** 27] });
  const e = invalid(() => startCopy({ s: small }, "cuda:0"), "too large");
  assertSame(e.path, ".s");
});

inputTest("switches in the environment: 1/true/yes/on turn on, 0/false/no/off and anything else leave off", async () => {
  const child = new URL("./fixtures/trace_child.ts", import.meta.url).pathname;
  for (const value of ["1", "true", "on", "YES"]) {
    const run = await runScript(child, [], { MTC_TRACE: value, MTC_TRACE_FFI: value });
    assertSame(run.code, 0, `${value}: ${run.stderr}`);
    assert(run.stderr.includes("mtc trace:"), `MTC_TRACE=${value} traces:\n${run.stderr}`);
    assert(run.stderr.includes("[mtc ffi] mtc_plan_create("), `MTC_TRACE_FFI=${value} logs FFI calls:\n${run.stderr}`);
  }
  for (const value of ["0", "false", "off", "no", "OFF", "2", "maybe"]) {
    const run = await runScript(child, [], { MTC_TRACE: value, MTC_TRACE_FFI: value });
    assertSame(run.code, 0, `${value}: ${run.stderr}`);
    assert(!run.stderr.includes("mtc trace:"), `MTC_TRACE=${value} is off:\n${run.stderr}`);
    assert(!run.stderr.includes("[mtc ffi] mtc_plan_create("), `MTC_TRACE_FFI=${value} is off:\n${run.stderr}`);
  }
}, 120_000);
